//! The backoff between attempts: waited out on the timer, and a zero wait is
//! no wait at all.

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn retries_wait_out_the_backoff() {
    for path in PATHS {
        let policy = Policy::builder()
            .max_attempts(4)
            .base(ms(100))
            .cap(ms(250))
            .jitter(Jitter::None)
            .build()
            .unwrap();
        let start = Instant::now();
        let times = std::sync::Mutex::new(Vec::new());
        let result = call(&policy, None, path, || {
            let mut times = times.lock().unwrap();
            times.push(start.elapsed());
            let n = times.len();
            async move { if n < 4 { Err(TestError::Transient) } else { Ok(n) } }
        })
        .await;
        assert_eq!(result, Ok(4), "{path:?}");
        assert_eq!(*times.lock().unwrap(), [ms(0), ms(100), ms(300), ms(550)], "{path:?}");
    }
}

/// The future's output if its first poll finishes it, else `None`.
async fn on_first_poll<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| match fut.as_mut().poll(cx) {
        std::task::Poll::Ready(value) => std::task::Poll::Ready(Some(value)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_zero_wait_is_no_wait_the_retry_runs_in_the_same_poll() {
    // Half a millisecond past a tick: a timer, even of zero, ends at the
    // timer's next tick, so a first poll that armed one would be Pending.
    tokio::time::advance(Duration::from_micros(500)).await;
    for path in PATHS {
        let policy =
            Policy::builder().max_attempts(3).base(Duration::ZERO).cap(Duration::ZERO).build().unwrap();
        let attempts = AtomicU32::new(0);
        let call = call(&policy, None, path, || async {
            let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
            if n < 3 { Err(TestError::Transient) } else { Ok(n) }
        });
        assert_eq!(on_first_poll(call).await, Some(Ok(3)), "{path:?}: no timer between the attempts");
        // Still half a millisecond past a tick for the next path.
        tokio::time::advance(ms(1)).await;
    }
}
