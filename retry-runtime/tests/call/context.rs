//! What an attempt runs in (the idempotency key and the nesting mark, across
//! polls, while it is dropped and after a panic) and what the call holds
//! between attempts (the last error, only until the next attempt begins).

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn the_key_and_nesting_are_seen_across_polls() {
    for path in PATHS {
        let outer = Policy::builder().max_attempts(3).build().unwrap();
        let inner = Policy::builder().max_attempts(3).nested(Nested::Once).build().unwrap();
        let inner_attempts = AtomicU32::new(0);
        let seen = call(&outer, Some("order-1"), path, || async {
            sleep(ms(1)).await; // the key survives a Pending poll
            let before = idempotency_key();
            // Nested calls make one attempt, and inherit the key.
            let failed = call(&inner, None, path, || async {
                inner_attempts.fetch_add(1, Ordering::SeqCst);
                sleep(ms(1)).await;
                Err::<(), _>(TestError::Transient)
            })
            .await;
            let inherited = call(&inner, None, path, || async { Ok(idempotency_key()) }).await;
            Ok((before, failed, inherited, idempotency_key()))
        })
        .await
        .unwrap();
        let key: Option<Arc<str>> = Some(Arc::from("order-1"));
        assert_eq!(seen, (key.clone(), Err(TestError::Transient), Ok(key.clone()), key), "{path:?}");
        assert_eq!(inner_attempts.load(Ordering::SeqCst), 1, "{path:?}: nested calls make one attempt");
        assert_eq!(idempotency_key(), None, "{path:?}: nothing leaks out of the attempt");
    }
}

/// An error holding a token: while it lives, the token has two owners.
#[derive(Debug)]
struct Holding(#[allow(dead_code)] Arc<()>);

impl stormproof_runtime::Classify for Holding {
    fn classify(&self) -> stormproof_runtime::ErrorClass {
        stormproof_runtime::ErrorClass::Transient
    }
}

impl From<Rejection> for Holding {
    fn from(_: Rejection) -> Self {
        Holding(Arc::new(()))
    }
}

#[tokio::test(start_paused = true)]
async fn the_last_error_is_dropped_as_the_next_attempt_begins_not_held_while_it_runs() {
    for path in PATHS {
        let policy = Policy::builder().max_attempts(2).base(ms(10)).jitter(Jitter::None).build().unwrap();
        let token = Arc::new(());
        let mut execution = policy.call(None, Kept::default(), ByTraits);
        let first = match path {
            Handed::Made => execution.attempt(async { Err::<usize, _>(Holding(token.clone())) }).await,
            Handed::ByClosure => {
                execution.attempt_with(|| async { Err::<usize, _>(Holding(token.clone())) }).await
            }
        };
        assert!(matches!(first, Step::Retry), "{path:?}");
        assert_eq!(Arc::strong_count(&token), 2, "{path:?}: kept across the wait");
        let owners = async { Ok::<_, Holding>(Arc::strong_count(&token)) };
        let second = match path {
            Handed::Made => execution.attempt(owners).await,
            Handed::ByClosure => execution.attempt_with(|| owners).await,
        };
        let Step::Done(Ok(owners_while_running)) = second else {
            panic!("{path:?}: the second attempt succeeds")
        };
        assert_eq!(
            owners_while_running, 1,
            "{path:?}: the superseded error was dropped when the attempt began"
        );
    }
}

/// Reads the key when dropped.
struct KeyOnDrop(Arc<std::sync::Mutex<Option<Option<Arc<str>>>>>);

impl Drop for KeyOnDrop {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(idempotency_key());
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_attempt_is_dropped_in_its_context() {
    for path in PATHS {
        let policy = Policy::builder().build().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(None));
        let guard = seen.clone();
        let cancelled = timeout(
            ms(5),
            call(&policy, Some("k-2"), path, move || {
                let guard = KeyOnDrop(guard.clone());
                async move {
                    let _guard = guard;
                    sleep(ms(50)).await;
                    Ok(())
                }
            }),
        )
        .await;
        assert!(cancelled.is_err());
        assert_eq!(*seen.lock().unwrap(), Some(Some(Arc::from("k-2"))), "{path:?}");
        assert_eq!(idempotency_key(), None, "{path:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_attempt_leaves_no_context_behind() {
    for path in PATHS {
        let policy = Policy::builder().build().unwrap();
        let attempt = || async {
            assert!(idempotency_key().is_some());
            panic!("the attempt panics (on purpose)");
            #[allow(unreachable_code)]
            Ok(())
        };
        let caught = catch_unwind(call(&policy, Some("k-3"), path, attempt)).await;
        let panicked = (caught, idempotency_key());
        assert!(panicked.0.is_err(), "{path:?}");
        assert_eq!(panicked.1, None, "{path:?}: the key was restored by the unwinding");
    }
}
