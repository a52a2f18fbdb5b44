//! Reading a configuration file from disk: only a regular file (links
//! followed), at most 1 MiB of it, in UTF-8; any other path is an error
//! naming it and what it is, and changes nothing of the running
//! configuration, whichever of the three readers meets it.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use stormproof::Registry;

/// A folder of its own for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("stormproof-reading-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A registry loaded from a good file whose breaker has `failure_threshold = 3`.
fn loaded(dir: &Dir) -> Registry {
    let good = dir.path("good.toml");
    std::fs::write(&good, "[breakers.payment]\nfailure_threshold = 3\n").unwrap();
    let registry = Registry::new();
    registry.load_file(&good).unwrap();
    registry
}

/// What each reader says of `path`, run on a thread so that a reader that
/// blocks fails the test instead of hanging the suite; the reload's
/// registry must keep its configuration.
fn every_reader_refuses(path: &Path) -> Vec<String> {
    let (tx, rx) = mpsc::channel();
    let owned = path.to_owned();
    std::thread::spawn(move || {
        let dir = Dir::new(&format!("reload-{}", owned.file_name().unwrap().to_string_lossy()));
        let registry = loaded(&dir);
        let load = Registry::new().load_file(&owned).unwrap_err().to_string();
        let reload = registry.reload_file(&owned).unwrap_err().to_string();
        let kept = registry.breaker("payment").unwrap().config().failure_threshold;
        #[cfg(feature = "redis")]
        let fleet = stormproof::fleet::FleetConfig::from_file(&owned).unwrap_err().to_string();
        #[cfg(not(feature = "redis"))]
        let fleet = load.clone();
        tx.send((load, reload, fleet, kept)).unwrap();
    });
    // Only a reader that blocks waits this long: a correct one answers at once.
    let (load, reload, fleet, kept) =
        rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("reading {path:?} blocked"));
    assert_eq!(kept, 3, "a refused reload changes nothing");
    vec![load, reload, fleet]
}

#[cfg(unix)]
#[test]
fn a_fifo_with_no_writer_is_refused_at_once_naming_it() {
    let dir = Dir::new("fifo");
    let fifo = dir.path("config.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    for message in every_reader_refuses(&fifo) {
        assert_eq!(
            message,
            format!("{}: cannot read the file: it is a FIFO, not a regular file", fifo.display())
        );
    }
}

#[cfg(unix)]
#[test]
fn a_device_or_a_directory_is_refused_naming_what_it_is() {
    let dir = Dir::new("kinds");
    let cases = [(PathBuf::from("/dev/zero"), "a character device"), (dir.path(""), "a directory")];
    for (path, kind) in cases {
        for message in every_reader_refuses(&path) {
            assert_eq!(
                message,
                format!("{}: cannot read the file: it is {kind}, not a regular file", path.display())
            );
        }
    }
}

#[cfg(unix)]
#[test]
fn a_link_is_followed_to_the_file_it_names() {
    let dir = Dir::new("link");
    let target = dir.path("real.toml");
    std::fs::write(&target, "[breakers.linked]\nfailure_threshold = 4\n").unwrap();
    let link = dir.path("link.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let registry = Registry::new();
    registry.load_file(&link).unwrap();
    assert_eq!(registry.breaker("linked").unwrap().config().failure_threshold, 4);
    let to_device = dir.path("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &to_device).unwrap();
    for message in every_reader_refuses(&to_device) {
        assert!(message.ends_with("it is a character device, not a regular file"), "{message}");
    }
}

#[test]
fn a_file_over_one_mebibyte_is_refused_naming_its_size_and_the_bound() {
    let dir = Dir::new("size");
    let path = dir.path("big.toml");
    // A valid file (comments) of exactly the bound is read.
    let line = "# padding padding padding padding padding padding padding padding\n";
    let mut text = "[breakers.big]\nfailure_threshold = 2\n".to_owned();
    while text.len() + line.len() <= 1 << 20 {
        text.push_str(line);
    }
    text.push_str(&"#".repeat((1 << 20) - text.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), 1 << 20);
    std::fs::write(&path, &text).unwrap();
    let registry = Registry::new();
    registry.load_file(&path).unwrap();
    assert_eq!(registry.breaker("big").unwrap().config().failure_threshold, 2);
    // One byte more is refused.
    text.push('\n');
    std::fs::write(&path, &text).unwrap();
    for message in every_reader_refuses(&path) {
        assert_eq!(
            message,
            format!(
                "{}: cannot read the file: it is 1048577 bytes, over the bound of 1048576 bytes",
                path.display()
            )
        );
    }
}

#[test]
fn a_file_that_is_not_utf8_is_refused_at_the_line_and_column_of_the_bad_byte() {
    let dir = Dir::new("utf8");
    let path = dir.path("latin1.toml");
    // "café" in Latin-1, after a multi-byte character on the same line.
    std::fs::write(&path, b"[breakers.a]\nfailure_threshold = 3 # \xc3\xa9t\xc3\xa9 caf\xe9\n").unwrap();
    for message in every_reader_refuses(&path) {
        assert_eq!(
            message,
            format!(
                "{}:2:32: the file is not UTF-8: the byte at offset 46 is not valid UTF-8",
                path.display()
            )
        );
    }
}
