//! Without feature `redis`, the file's fleet is a problem, not ignored.

use super::error;

#[test]
fn without_feature_redis_a_fleet_in_the_file_is_a_problem() {
    let needs = "needs feature `redis`: built without it, no guard is shared, and a guard the file calls fleet-wide would stay local to this process";
    assert_eq!(error("[fleet]\nurl = \"redis://127.0.0.1/\""), format!("<toml>:1:2: `[fleet]` {needs}"));
    assert_eq!(error("[breakers.a]\nfleet = true"), format!("<toml>:2:9: `fleet` {needs}"));
}
