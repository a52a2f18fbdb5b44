//! A gRPC service config's retries (gRFC A6, issue 44 item 5): a service
//! brings its `retryPolicy` and `retryThrottling` as JSON, and calls that
//! return `tonic::Status` retry the codes it lists, with its attempts and
//! backoff, paid from its throttling. On tokio's paused clock, each test in
//! its own registry.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormproof::grpc::ServiceConfig;
use stormproof::{ErrorClass, Registry};
use tokio::time::Instant;
use tonic::{Code, Status};

/// What a gRPC service keeps beside its channel: INTERNAL is retried (our
/// own classification of a bare status would not), DEADLINE_EXCEEDED is
/// not (ours would).
const CONFIG: &str = r#"{
    "loadBalancingConfig": [{ "round_robin": {} }],
    "methodConfig": [
        {
            "name": [{ "service": "shop.Inventory" }],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.1s",
                "maxBackoff": "0.3s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE", "INTERNAL"]
            }
        },
        { "name": [{ "service": "shop.Inventory", "method": "Audit" }] },
        {
            "name": [{}],
            "retryPolicy": {
                "maxAttempts": 9,
                "initialBackoff": "1s",
                "maxBackoff": "10s",
                "backoffMultiplier": 1.5,
                "retryableStatusCodes": [14]
            }
        }
    ],
    "retryThrottling": { "maxTokens": 6, "tokenRatio": 0.5 }
}"#;

fn config() -> &'static ServiceConfig {
    static PARSED: OnceLock<ServiceConfig> = OnceLock::new();
    PARSED.get_or_init(|| ServiceConfig::from_json(CONFIG).unwrap())
}

/// The classification `Policy::classify` is given: the config's, for the
/// method called.
fn by_config(status: &Status) -> ErrorClass {
    config().retry_policy("shop.Inventory", "Reserve").unwrap().classify(status)
}

/// Runs one call of `shop.Inventory/Reserve` that answers `answers` in turn
/// (then OK); the attempts it made, when each began, and its result.
async fn reserve(registry: &Registry, answers: &[Code]) -> (Vec<Duration>, Result<(), Status>) {
    let policy = config().retry_policy("shop.Inventory", "Reserve").unwrap();
    let policy =
        policy.builder().name("reserve").budget("inventory").breaker("none").seed(7).build().unwrap();
    let start = Instant::now();
    let attempts = std::sync::Mutex::new(Vec::new());
    let call = AtomicU32::new(0);
    let result = registry
        .scope(policy.classify(by_config).run(|| {
            attempts.lock().unwrap().push(start.elapsed());
            let n = call.fetch_add(1, Ordering::SeqCst) as usize;
            let answer = answers.get(n).copied();
            async move {
                match answer {
                    Some(code) => Err(Status::new(code, "from the server")),
                    None => Ok(()),
                }
            }
        }))
        .await;
    (attempts.into_inner().unwrap(), result)
}

/// The listed codes are retried with the config's backoff (full jitter
/// under 0.1 s, then 0.2 s, then the 0.3 s cap); the others end the call,
/// whatever the library would have made of them. (No throttling declared
/// here: its 6 tokens would stop the third retry.)
#[tokio::test(start_paused = true)]
async fn the_configs_codes_are_retried_with_its_backoff_and_the_others_are_not() {
    let registry = Registry::new();
    let (attempts, result) =
        reserve(&registry, &[Code::Unavailable, Code::Internal, Code::Unavailable]).await;
    assert_eq!(result.map_err(|s| s.code()), Ok(()), "the fourth attempt succeeded");
    assert_eq!(attempts.len(), 4);
    let waits: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    for (wait, bound) in waits.iter().zip([100, 200, 300]) {
        assert!(*wait <= Duration::from_millis(bound), "{waits:?}");
    }
    let (attempts, result) = reserve(&registry, &[Code::DeadlineExceeded]).await;
    assert_eq!((attempts.len(), result.unwrap_err().code()), (1, Code::DeadlineExceeded), "not listed");
}

/// Its `retryThrottling` is the budget the policy names: 6 tokens, so
/// three failed attempts stop the retries (3 is not above half).
#[tokio::test(start_paused = true)]
async fn its_retry_throttling_stops_retries_at_half_its_tokens() {
    let registry = Registry::new();
    config().declare_throttling(&registry, "inventory").unwrap();
    let down = [Code::Unavailable; 8];
    let (attempts, result) = reserve(&registry, &down).await;
    assert_eq!((attempts.len(), result.unwrap_err().code()), (3, Code::Unavailable), "6, 5, 4 then 3");
    let (attempts, _) = reserve(&registry, &down).await;
    assert_eq!(attempts.len(), 1, "no retry while at or below half");
}

/// gRPC's choice of policy: the method's own config, else its service's,
/// else the default; a method config without `retryPolicy` has none; more
/// than five attempts are read as five.
#[test]
fn each_method_gets_the_policy_grpc_would_pick() {
    let config = config();
    let reserve = config.retry_policy("shop.Inventory", "Reserve").unwrap();
    assert_eq!((reserve.max_attempts, reserve.initial_backoff), (4, Duration::from_millis(100)));
    assert_eq!(config.retry_policy("shop.Inventory", "Audit"), None, "its own config has no retries");
    let other = config.retry_policy("shop.Billing", "Charge").unwrap();
    assert_eq!((other.max_attempts, other.retryable_status_codes.clone()), (5, vec![Code::Unavailable]));
    assert_eq!(other.builder().build().unwrap().max_attempts(), 5);
}

/// A config gRPC would refuse is an error naming the field.
#[test]
fn an_invalid_config_names_its_field() {
    let field = |json: &str| ServiceConfig::from_json(json).unwrap_err().field;
    let policy =
        |body: &str| format!(r#"{{ "methodConfig": [{{ "name": [{{}}], "retryPolicy": {{ {body} }} }}] }}"#);
    let valid = r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]"#;
    assert!(ServiceConfig::from_json(&policy(valid)).is_ok());
    assert_eq!(field(&policy(&valid.replace("3,", "1,"))), "maxAttempts");
    assert_eq!(field(&policy(&valid.replace("\"0.1s\"", "\"100ms\""))), "initialBackoff");
    assert_eq!(field(&policy(&valid.replace("\"1s\"", "\"0s\""))), "maxBackoff");
    assert_eq!(field(&policy(&valid.replace(": 2,", ": 0.5,"))), "backoffMultiplier");
    assert_eq!(field(&policy(&valid.replace("\"UNAVAILABLE\"", "\"SOMETIMES\""))), "retryableStatusCodes");
    assert_eq!(field(&policy(&valid.replace("[\"UNAVAILABLE\"]", "[]"))), "retryableStatusCodes");
    assert_eq!(field(r#"{ "retryThrottling": { "maxTokens": 0, "tokenRatio": 0.1 } }"#), "maxTokens");
    assert_eq!(field(r#"{ "retryThrottling": { "maxTokens": 10, "tokenRatio": 0 } }"#), "tokenRatio");
    assert_eq!(field("{ not json"), "serviceConfig");
}
