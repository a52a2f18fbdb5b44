//! A real `redis-server` for one test: a free loopback port, no persistence,
//! stopped (and its state gone) when dropped.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    port: u16,
    child: Option<Child>,
}

/// Whether the suite must not skip (`.ci/run` sets it).
fn required() -> bool {
    std::env::var("STORMPROOF_REQUIRE_REDIS").is_ok_and(|v| v == "1")
}

impl Server {
    /// A running server, or `None` (after saying why) when `redis-server`
    /// is not installed and the suite may skip. Panics when it is missing
    /// and `STORMPROOF_REQUIRE_REDIS=1`.
    pub fn start(test: &str) -> Option<Server> {
        if Command::new("redis-server").arg("--version").output().is_err() {
            let why = "redis-server is not installed (scripts/ensure-redis.sh installs it)";
            assert!(!required(), "{test}: {why}, and STORMPROOF_REQUIRE_REDIS=1 says this run must not skip");
            eprintln!("skipping {test}: {why}");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let mut server = Server { port, child: None };
        server.restart();
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts it (again, on the same port, with no state): for the tests of
    /// a server that went away and came back.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let started = Instant::now();
        while self.connection().is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "redis-server did not answer within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops it: its state is gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes it (SIGSTOP): connections stay open and nothing answers.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Thaws a frozen server (SIGCONT).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill").args([&format!("-{name}"), &pid]).status().expect("kill runs");
        assert!(status.success(), "kill -{name} {pid}");
    }

    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(1))
    }

    /// Every key matching `pattern`, with the integer fields of each hash summed.
    pub fn sum_field(&self, pattern: &str, field: &str) -> u64 {
        let mut con = self.connection().expect("connected");
        let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut con).expect("KEYS");
        keys.iter()
            .map(|key| {
                let value: Option<u64> =
                    redis::cmd("HGET").arg(key).arg(field).query(&mut con).expect("HGET");
                value.unwrap_or(0)
            })
            .sum()
    }

    pub fn command(&self, args: &[&str]) -> redis::Value {
        let mut con = self.connection().expect("connected");
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut con).expect("the command runs")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A frozen server would ignore SIGKILL's reaping until thawed.
            let _ = Command::new("kill").args(["-CONT", &child.id().to_string()]).status();
        }
        self.stop();
    }
}
