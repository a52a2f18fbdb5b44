//! The one Lua script a flush runs (`flush.lua`), and its arguments and
//! answer as Rust values.
//!
//! Keys, all under the fleet's prefix `P`, each with a TTL:
//!
//! | key | what | TTL |
//! |---|---|---|
//! | `P:breaker:NAME` | hash: `epoch`, `since` (when it began, server ms; 0 unknown), `until` (the open-until instant, server ms; 0 closed), `slots`, `slots_at`, `ok` | `state_ttl`, renewed by every flush |
//! | `P:breaker:NAME:EPOCH:BUCKET` | hash: `c` calls, `f` failures in one tenth of the window | window + a tenth |
//! | `P:budget:NAME:BUCKET` | hash: `first` first attempts, `leased` tokens leased | window + a tenth |
//! | `P:replica:ID:breaker:NAME`, `P:replica:ID:budget:NAME` | hash: the totals the server last applied for one replica (tokens handed back, `ret`, among them), its last lease, its leases in the window by bucket (`g:BUCKET`), its last probe slots granted (`pseq`, `pepoch`, `pround`, `pgranted`) | 2 × window + `state_ttl` |
//!
//! Buckets of the breaker carry the fleet's epoch, so that a transition
//! starts a clean window, as a local breaker's does. `NAME` is the guard's
//! name with `%` and `:` escaped (`%25`, `%3A`): no name reads as other
//! parts of a key (a breaker `dep:0:18` as bucket 18 of `dep`), and a name
//! with neither is as it was.
//!
//! Every one of these keys is a hash, and the script names each through
//! one function (`hash`) before any command on it: a key that holds
//! another type (another program's string) is deleted, as if it had
//! expired, and named in the answer, whose last element is the array of
//! the keys so replaced (empty, as a rule); before it, the server's time,
//! 4 numbers per breaker (epoch, state, open time left, probes granted)
//! and 1 per budget (tokens leased).

use std::time::Duration;

use redis::{Script, Value};

use stormproof_runtime::fleet::HORIZON;

/// How long the fleet's state outlives the last flush that touched it.
pub(super) const STATE_TTL: Duration = Duration::from_secs(3_600);

/// The script; `redis::Script` sends its hash and loads it only when the
/// server does not know it (after a restart, say).
pub(super) fn script() -> Script {
    Script::new(include_str!("flush.lua"))
}

/// What one replica reports of one breaker.
#[derive(Debug, Clone)]
pub(super) struct BreakerReport {
    pub(super) name: String,
    pub(super) window: Duration,
    pub(super) failure_threshold: u32,
    /// 0 in count mode.
    pub(super) rate_percent: u8,
    pub(super) minimum_calls: u32,
    pub(super) open_for: Duration,
    pub(super) half_open_max_calls: u32,
    pub(super) success_threshold: u32,
    /// The fleet epoch this replica last saw.
    pub(super) seen: u64,
    /// Probes this replica asks for (0: none).
    pub(super) want: u32,
    /// The probe request's sequence number: one sent again (its flush
    /// timed out) gets the slots the first was granted, not new ones.
    pub(super) seq: u64,
    /// The fleet's state as this replica knows it (what the fleet's state
    /// is rebuilt from if it was lost).
    pub(super) view: FleetState,
    /// Cumulative calls, failures, probe successes, probe failures.
    pub(super) totals: [u64; 4],
    /// The same, as last acknowledged by the server.
    pub(super) acked: [u64; 4],
    /// Calls and failures as sent in the flushes not acknowledged since,
    /// with their ages (see [`Backlog`](super::backlog::Backlog)).
    pub(super) backlog: Vec<(Duration, [u64; 2])>,
}

/// What one replica reports of one budget.
#[derive(Debug, Clone)]
pub(super) struct BudgetReport {
    pub(super) name: String,
    pub(super) window: Duration,
    pub(super) ratio: f64,
    /// Retries the fleet may make per window whatever its traffic.
    pub(super) floor: u64,
    pub(super) first_attempts: u64,
    pub(super) acked_first_attempts: u64,
    /// First attempts as sent in the flushes not acknowledged since, with their ages.
    pub(super) backlog: Vec<(Duration, [u64; 1])>,
    /// The lease request's sequence number: a repeated one gets the same answer.
    pub(super) seq: u64,
    pub(super) want: u32,
    /// Unused leased tokens handed back (when a lease ended), in all.
    pub(super) returned: u64,
    pub(super) acked_returned: u64,
}

/// The fleet's verdict on one breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BreakerVerdict {
    pub(super) epoch: u64,
    pub(super) state: FleetState,
    /// Probes granted to this replica.
    pub(super) granted: u32,
}

/// A fleet breaker's state as the server saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FleetState {
    Closed,
    Open { remaining: Duration },
    HalfOpen,
}

/// What a flush answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    /// The server's clock as the script ran, in ms.
    pub(super) now: u64,
    pub(super) breakers: Vec<BreakerVerdict>,
    /// Tokens leased, per budget.
    pub(super) budgets: Vec<u32>,
    /// The keys the script found holding another type than a hash, and
    /// replaced (deleted, as if expired).
    pub(super) replaced: Vec<String>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A window's bucket: a tenth of it, at least a millisecond.
fn width(window: Duration) -> u64 {
    (millis(window) / 10).max(1)
}

/// A backlog as `flush.lua` reads it: how many samples, then each one's
/// age in ms and totals.
fn backlog<const N: usize>(args: &mut Vec<String>, samples: &[(Duration, [u64; N])]) {
    args.push(samples.len().to_string());
    for (age, totals) in samples {
        args.push(u64::try_from(age.as_millis()).unwrap_or(u64::MAX).to_string());
        args.extend(totals.iter().map(u64::to_string));
    }
}

/// The script's arguments, in the order `flush.lua` reads them. `sent_at`
/// is the replica's reckoning of the server's clock now, in ms (0: none
/// yet), which the ages of the backlogs count back from.
pub(super) fn arguments(
    prefix: &str,
    replica: u64,
    sent_at: u64,
    breakers: &[BreakerReport],
    budgets: &[BudgetReport],
) -> Vec<String> {
    let mut args = vec![
        prefix.to_owned(),
        format!("{replica:016x}"),
        breakers.len().to_string(),
        budgets.len().to_string(),
        millis(STATE_TTL).to_string(),
        sent_at.to_string(),
    ];
    for b in breakers {
        // At most tokio's horizon ("never" past it, as everywhere else): the
        // script's arithmetic is Lua's, and Redis takes back only integers
        // below 1e17 (a larger TTL is written `2e+17`, which PEXPIRE refuses)
        // and returns none past 2^63 (an open time left came back as
        // i64::MIN): every flush of such a breaker failed.
        let (window, open_for) = (b.window.min(HORIZON), b.open_for.min(HORIZON));
        // -1 closed, 0 half-open, else the open time left (at least 1 ms).
        let view = match b.view {
            FleetState::Closed => -1,
            FleetState::HalfOpen => 0,
            FleetState::Open { remaining } => i64::try_from(millis(remaining)).unwrap_or(i64::MAX),
        };
        args.extend([
            b.name.clone(),
            millis(window).to_string(),
            width(window).to_string(),
            b.failure_threshold.to_string(),
            b.rate_percent.to_string(),
            b.minimum_calls.to_string(),
            millis(open_for).to_string(),
            b.half_open_max_calls.to_string(),
            b.success_threshold.to_string(),
            b.seen.to_string(),
            b.want.to_string(),
            view.to_string(),
        ]);
        args.extend(b.totals.iter().chain(&b.acked).map(u64::to_string));
        args.push(b.seq.to_string());
        backlog(&mut args, &b.backlog);
    }
    for b in budgets {
        args.extend([
            b.name.clone(),
            millis(b.window).to_string(),
            width(b.window).to_string(),
            format!("{:?}", b.ratio),
            b.floor.to_string(),
            b.first_attempts.to_string(),
            b.acked_first_attempts.to_string(),
            b.seq.to_string(),
            b.want.to_string(),
            b.returned.to_string(),
            b.acked_returned.to_string(),
        ]);
        backlog(&mut args, &b.backlog);
    }
    args
}

/// Reads the script's answer for `breakers` breakers and `budgets` budgets:
/// its numbers, then the array of the keys it replaced. A reply of another
/// shape (the server's, not the script's) is an error, never a panic.
pub(super) fn answer(reply: Value, breakers: usize, budgets: usize) -> Result<Answer, String> {
    let Value::Array(mut reply) = reply else {
        return Err("the flush script answered no array".into());
    };
    let Some(Value::Array(replaced)) = reply.pop() else {
        return Err("the flush script's answer does not end with the keys it replaced".into());
    };
    let replaced = replaced
        .into_iter()
        .map(|key| match key {
            Value::BulkString(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Value::SimpleString(key) => Ok(key),
            _ => Err("the flush script named a key replaced with no string".to_owned()),
        })
        .collect::<Result<_, _>>()?;
    let values = reply
        .into_iter()
        .map(|n| match n {
            Value::Int(n) => Ok(n),
            _ => Err("the flush script answered something other than a number".to_owned()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Answer { replaced, ..numbers(&values, breakers, budgets)? })
}

/// The numbers of the script's answer (the keys it replaced apart).
fn numbers(reply: &[i64], breakers: usize, budgets: usize) -> Result<Answer, String> {
    let expected = 1 + 4 * breakers + budgets;
    if reply.len() != expected {
        return Err(format!("the flush script answered {} numbers, expected {expected}", reply.len()));
    }
    let count =
        |n: i64| u64::try_from(n).map_err(|_| format!("the flush script answered {n}, expected a count"));
    let mut verdicts = Vec::with_capacity(breakers);
    for chunk in reply[1..1 + 4 * breakers].chunks_exact(4) {
        let state = match chunk[1] {
            0 => FleetState::Closed,
            // At most tokio's horizon: the replica adds it to the time now.
            1 => FleetState::Open { remaining: Duration::from_millis(count(chunk[2])?).min(HORIZON) },
            2 => FleetState::HalfOpen,
            other => return Err(format!("the flush script answered state {other}, expected 0, 1 or 2")),
        };
        let granted = u32::try_from(count(chunk[3])?).unwrap_or(u32::MAX);
        verdicts.push(BreakerVerdict { epoch: count(chunk[0])?, state, granted });
    }
    let leased = reply[1 + 4 * breakers..]
        .iter()
        .map(|n| count(*n).map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
        .collect::<Result<_, _>>()?;
    Ok(Answer { now: count(reply[0])?, breakers: verdicts, budgets: leased, replaced: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_of_the_wrong_shape_are_errors_not_panics() {
        assert!(numbers(&[], 0, 0).is_err());
        assert!(numbers(&[1, 0, 0, 0], 1, 0).is_err());
        assert!(numbers(&[1, 0, 7, 0, 0], 1, 0).unwrap_err().contains("state 7"));
        assert!(numbers(&[1, -1, 0, 0, 0], 1, 0).is_err());
        assert!(numbers(&[-1, 3, 1, 250, 0], 1, 0).is_err(), "a time before 1970");
        let ok = numbers(&[1, 3, 1, 250, 0, 9], 1, 1).unwrap();
        assert_eq!(ok.breakers[0].state, FleetState::Open { remaining: Duration::from_millis(250) });
        assert_eq!(ok.budgets, [9]);
        // A store that says "open for 292 million years" is heard as the horizon.
        let forever = numbers(&[1, 3, 1, i64::MAX, 0], 1, 0).unwrap();
        assert_eq!(forever.breakers[0].state, FleetState::Open { remaining: HORIZON });
    }

    #[test]
    fn the_keys_replaced_end_the_answer_and_a_reply_of_another_shape_is_an_error() {
        let int = Value::Int;
        let key = |name: &str| Value::BulkString(name.as_bytes().to_vec());
        let reply = |items: Vec<Value>| Value::Array(items);
        let keys = reply(vec![key("p:breaker:dep"), key("p:budget:dep:17")]);
        let ok = answer(reply(vec![int(1), int(0), int(0), int(0), int(0), int(4), keys]), 1, 1).unwrap();
        assert_eq!(ok.replaced, ["p:breaker:dep", "p:budget:dep:17"]);
        assert_eq!((ok.now, ok.budgets.as_slice()), (1, &[4][..]));
        let none = answer(reply(vec![int(1), reply(vec![])]), 0, 0).unwrap();
        assert!(none.replaced.is_empty());
        for hostile in [
            int(1),
            Value::Nil,
            reply(vec![]),
            reply(vec![int(1)]),
            reply(vec![int(1), reply(vec![int(5)])]),
            reply(vec![key("1"), reply(vec![])]),
            reply(vec![reply(vec![]), int(1)]),
            reply(vec![int(1), int(0), int(0), int(0), reply(vec![])]),
        ] {
            assert!(answer(hostile.clone(), 0, 0).is_err(), "{hostile:?}");
        }
    }

    /// One rule for every key: each hash command of the script names its
    /// key through `hash`, which replaces a key of another type. A command
    /// that did not made every flush fail while such a key lasted (a
    /// breaker's or a budget's bucket, before, where only the state and
    /// the records were looked at).
    #[test]
    fn every_hash_command_of_the_script_names_its_key_through_hash() {
        let script = include_str!("flush.lua");
        let mut commands = 0;
        for (at, _) in script.match_indices("call('H") {
            let command = &script[at..];
            let key = &command[command.find("', ").expect("a command and its key")..];
            assert!(key.starts_with("', hash("), "a key not looked at: {}", command.lines().next().unwrap());
            commands += 1;
        }
        assert!(commands >= 15, "{commands} hash commands found: the search no longer finds them");
    }

    #[test]
    fn arguments_follow_the_scripts_layout() {
        let breaker = BreakerReport {
            name: "db".into(),
            window: Duration::from_secs(10),
            failure_threshold: 5,
            rate_percent: 0,
            minimum_calls: 10,
            open_for: Duration::from_secs(30),
            half_open_max_calls: 2,
            success_threshold: 2,
            seen: 3,
            want: 0,
            seq: 9,
            view: FleetState::Closed,
            totals: [1, 2, 3, 4],
            acked: [0, 0, 0, 0],
            backlog: vec![(Duration::from_millis(1_500), [1, 1])],
        };
        let args = arguments("p", 255, 7, std::slice::from_ref(&breaker), &[]);
        assert_eq!(args.len(), 6 + 22 + 3, "the header, 22 per breaker and 3 per sample, as flush.lua steps");
        assert_eq!(&args[..6], ["p", "00000000000000ff", "1", "0", "3600000", "7"]);
        assert_eq!(&args[6..9], ["db", "10000", "1000"]);
        assert_eq!(args[17], "-1", "a closed view");
        assert_eq!(args[26], "9", "the probe request's sequence number");
        assert_eq!(&args[27..], ["1", "1500", "1", "1"], "one sample: its age, calls, failures");
        let never = BreakerReport { window: Duration::MAX, open_for: Duration::MAX, ..breaker.clone() };
        let horizon = millis(HORIZON).to_string();
        let args = arguments("p", 255, 7, &[never], &[]);
        assert_eq!((&args[7], &args[12]), (&horizon, &horizon), "a window and an open time past the horizon");
        let half_open = BreakerReport { view: FleetState::HalfOpen, ..breaker.clone() };
        assert_eq!(arguments("p", 255, 0, &[half_open], &[])[17], "0");
        let open =
            BreakerReport { view: FleetState::Open { remaining: Duration::from_micros(10) }, ..breaker };
        assert_eq!(
            arguments("p", 255, 0, &[open], &[])[17],
            "1",
            "open: at least 1 ms, never read as half-open"
        );
    }
}
