//! Replicas as OS processes: this test binary run again with
//! `--ignored --exact replica_process` and its role in the environment.
//! Each prints `READY` once its fleet is linked, waits for `GO <t0>` (the
//! common start, in wall-clock ms) on its standard input, runs its role and
//! prints `RESULT key=value ...`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

pub fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64
}

pub struct Replica {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Replica {
    pub fn spawn(role: &str, env: &[(&str, String)]) -> Replica {
        let exe = std::env::current_exe().expect("the test binary");
        let mut command = Command::new(exe);
        command
            .args(["--ignored", "--exact", "replica_process", "--test-threads=1"])
            .env("FLEET_ROLE", role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the replica starts");
        let out = BufReader::new(child.stdout.take().expect("piped"));
        Replica { child, out }
    }

    /// The next line that starts with `prefix`, without it.
    fn line(&mut self, prefix: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.out.read_line(&mut line).expect("the replica's output");
            assert!(read > 0, "the replica ended before printing `{prefix}`");
            // libtest prints `test replica_process ... ` before the test's
            // own output, on the same line.
            if let Some(at) = line.find(prefix) {
                return line[at + prefix.len()..].trim().to_owned();
            }
        }
    }

    pub fn wait_ready(&mut self) {
        self.line("READY");
    }

    pub fn go(&mut self, t0: u64) {
        let stdin = self.child.stdin.as_mut().expect("piped");
        writeln!(stdin, "GO {t0}").and_then(|()| stdin.flush()).expect("the replica reads");
    }

    /// Its `RESULT` line, as numbers by key; waits for it to exit.
    pub fn result(mut self) -> HashMap<String, u64> {
        let line = self.line("RESULT");
        let status = self.child.wait().expect("the replica exits");
        assert!(status.success(), "the replica failed: {status}");
        line.split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.parse().unwrap_or_else(|_| panic!("{k}={v} is not a number"))))
            .collect()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `count` replicas of `role`, waits until every one is linked, and
/// gives them one common start a little ahead.
pub fn start(count: usize, role: &str, env: &[(&str, String)]) -> (Vec<Replica>, u64) {
    let mut replicas: Vec<Replica> = (0..count).map(|_| Replica::spawn(role, env)).collect();
    replicas.iter_mut().for_each(Replica::wait_ready);
    let t0 = wall_ms() + 50;
    replicas.iter_mut().for_each(|r| r.go(t0));
    (replicas, t0)
}
