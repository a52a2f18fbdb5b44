//! The fleet simulation (`stormproof::sim::simulate_fleet`): R replicas of 4
//! clients each against a dependency that is down for 12 s, with breakers
//! local to each replica or shared by the fleet (feature `redis`). Virtual
//! time and seeded phases: the same table on every run.
//!
//! ```sh
//! cargo run --example fleet        # scripts/readme-fleet.sh puts it in the README
//! ```

use stormproof::sim::{FleetSimConfig, Guards, simulate_fleet};

fn main() -> Result<(), stormproof::ConfigError> {
    let base = FleetSimConfig::default();
    println!(
        "{} clients per replica, one call each per {:?}; down for {:?}; breaker: {} failures in {:?}, open {:?}, {} probes; sync every {:?}",
        base.clients,
        base.call_every,
        base.down_for,
        base.breaker.failure_threshold,
        base.breaker.window,
        base.breaker.open_for,
        base.breaker.half_open_max_calls,
        base.sync_every,
    );
    println!();
    println!(
        "| replicas | breakers | failed calls before all stopped | failed calls in all | probes in all | probes per recovery | time to full recovery |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for replicas in [1, 5, 20, 50] {
        let config = FleetSimConfig { replicas, ..base };
        for guards in [Guards::Local, Guards::Fleet] {
            let r = simulate_fleet(&config, guards)?;
            let recovery = r.recovery.map_or("never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()));
            let guards = match guards {
                Guards::Local => "local",
                Guards::Fleet => "fleet",
            };
            println!(
                "| {replicas} | {guards} | {} | {} | {} | {} | {recovery} |",
                r.failed_before_stop, r.failed_calls, r.probes, r.probes_per_recovery
            );
        }
    }
    Ok(())
}
