//! Rootful against rootless podman, on both storage drivers: the real `ah`
//! run by root, by `AH_TEST_USER` and by `AH_TEST_OVERLAY_USER`, each run
//! on a fresh project the runner owns, against the tests' mock model, the
//! runners taking turns. Every runner is started the same way (`runuser`,
//! root too), so what differs is podman.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ah_sandbox::podman::DEFAULT_IMAGE;
use serde_json::json;

use crate::ms;
use crate::support::mock::{MockServer, Reply, Turn};

/// Runs per runner, after one that warms it (and makes a `vfs` user's
/// copy of the image's root if it has none).
const RUNS: usize = 7;
/// How long one run, or its cleanup, may take before the bench gives up.
const LIMIT: Duration = Duration::from_secs(120);
/// The targets of the comparison.
const FIRST_TARGET: Duration = Duration::from_millis(150);
const END_TARGET: Duration = Duration::from_millis(50);

/// Who runs ah, and what its podman stands the run's container on.
struct Runner {
    user: String,
    home: PathBuf,
    /// The storage driver of the user's podman.
    driver: String,
    /// The copy of the image's root a rootless run stands on where its
    /// storage copies the image per container (`vfs`).
    copy: Option<PathBuf>,
}

/// The times of one run.
struct Times {
    /// Spawn → the request carrying the first command's answer.
    first: Duration,
    /// That request → ah's exit (the model's last answer comes at once).
    end: Duration,
    /// ah's exit → the detached cleanup done with the sandbox.
    removal: Duration,
}

pub(crate) fn rootful_against_rootless() {
    println!(
        "rootful against rootless podman: ah with one `bash true` step against the mock model, \
         {RUNS} runs each after one to warm, interleaved; median (min–max)"
    );
    if !rustix::process::geteuid().is_root() {
        println!(
            "  skipped: run the bench as root, which runs ah as root and as the test users \
             (sudo -E cargo bench --bench sandbox -- rootless)"
        );
        return;
    }
    // A folder every runner can reach: ah's copy and the projects.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let ah = dir.path().join("ah");
    std::fs::copy(env!("CARGO_BIN_EXE_ah"), &ah).expect("copy ah");
    std::fs::set_permissions(&ah, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let home = dir.path().join("root-home");
    std::fs::create_dir(&home).expect("root's home");

    let mut runners = vec![Runner::new("root".to_string(), home).expect("root's podman")];
    for (variable, storage) in [("AH_TEST_USER", "vfs"), ("AH_TEST_OVERLAY_USER", "overlay")] {
        match Runner::from_env(variable) {
            Ok(runner) => runners.push(runner),
            Err(why) => println!("  rootless on {storage} storage: skipped: {why}"),
        }
    }
    for runner in &runners {
        runner.run(&ah, dir.path());
    }
    let mut times: Vec<Vec<Times>> = runners.iter().map(|_| Vec::new()).collect();
    for _ in 0..RUNS {
        for (runner, times) in runners.iter().zip(&mut times) {
            times.push(runner.run(&ah, dir.path()));
        }
    }

    println!(
        "  {:<48} | {:<30} | {:<22} | {:<22}",
        "", "spawn → first command's answer", "last answer → exit", "exit → sandbox removed"
    );
    let mut medians = Vec::new();
    for (runner, times) in runners.iter().zip(&times) {
        let first = spread(times.iter().map(|t| t.first));
        let end = spread(times.iter().map(|t| t.end));
        let removal = spread(times.iter().map(|t| t.removal));
        println!(
            "  {:<48} | {:<30} | {:<22} | {:<22}",
            runner.label(),
            first.0,
            end.0,
            removal.0
        );
        medians.push((first.1, end.1));
    }
    for (runner, &(first, end)) in runners.iter().zip(&medians).skip(1) {
        let extra = first.as_secs_f64() * 1000.0 - medians[0].0.as_secs_f64() * 1000.0;
        println!(
            "  {}: first command's answer {extra:+.1} ms of rootful's (target ≤ +{} ms), end \
             wait {} (target ≤ {} ms)",
            runner.short_label(),
            FIRST_TARGET.as_millis(),
            ms(end),
            END_TARGET.as_millis()
        );
    }
    for runner in &runners {
        println!("  {}: root from {}", runner.short_label(), runner.root());
    }
}

impl Runner {
    /// The user named by `variable`, with the sandbox image in its storage;
    /// why not when it cannot run here.
    fn from_env(variable: &str) -> Result<Runner, String> {
        let user = std::env::var(variable)
            .ok()
            .filter(|name| !name.is_empty())
            .ok_or(format!(
                "{variable} is not set (scripts/setup creates the user it names)"
            ))?;
        let passwd = Command::new("getent")
            .args(["passwd", &user])
            .output()
            .map_err(|e| format!("getent could not run: {e}"))?;
        let entry = String::from_utf8_lossy(&passwd.stdout).trim().to_string();
        let home = entry
            .split(':')
            .nth(5)
            .ok_or(format!(
                "{variable}={user}: no such user (scripts/setup creates it)"
            ))?
            .into();
        Runner::new(user, home)
    }

    /// `user` with `home`, its podman asked for its driver and image.
    fn new(user: String, home: PathBuf) -> Result<Runner, String> {
        let mut runner = Runner {
            user,
            home,
            driver: String::new(),
            copy: None,
        };
        runner.driver = runner.podman(&["info", "--format", "{{.Store.GraphDriverName}}"])?;
        let id = runner
            .podman(&["image", "inspect", "--format", "{{.Id}}", DEFAULT_IMAGE])
            .map_err(|why| {
                format!(
                    "{why}: build the image in {0}'s storage with `runuser -u {0} -- ah image \
                     build --offline` (minutes, once)",
                    runner.user
                )
            })?;
        if runner.user != "root" && runner.driver == "vfs" {
            runner.copy = Some(runner.home.join(".cache/ah/rootfs").join(id));
        }
        Ok(runner)
    }

    /// `podman ARGS` as the user: its output, or why it failed.
    fn podman(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .command(Path::new("podman"), &[])
            .args(args)
            .output()
            .map_err(|e| format!("runuser could not run: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(format!(
                "podman {} as {} failed: {}",
                args.join(" "),
                self.user,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// `program` run as the user, from `/`, with an environment of only
    /// its home, name and path and `env`; output captured.
    fn command(&self, program: &Path, env: &[(&str, &str)]) -> Command {
        let mut command = Command::new("runuser");
        command
            .args(["-u", &self.user, "--", "env", "-i"])
            .arg(format!("HOME={}", self.home.display()))
            .arg(format!("USER={}", self.user))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .args(env.iter().map(|(key, value)| format!("{key}={value}")))
            .arg(program)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn short_label(&self) -> String {
        match self.user.as_str() {
            "root" => "rootful".to_string(),
            user => format!("rootless {} ({user})", self.driver),
        }
    }

    fn label(&self) -> String {
        match &self.copy {
            Some(_) => format!("{}, cached copy", self.short_label()),
            None if self.user == "root" => format!("rootful, {} storage", self.driver),
            None => format!("{}, image's layers", self.short_label()),
        }
    }

    /// What the runs stood on, as the user's cache shows it.
    fn root(&self) -> String {
        let cache = self.home.join(".cache/ah/rootfs");
        match &self.copy {
            Some(copy) if copy.is_dir() => format!("the copy {}", copy.display()),
            Some(copy) => format!(
                "the image: no copy at {} (see the runs' notes)",
                copy.display()
            ),
            None if self.user == "root" => "the image (rootful podman)".to_string(),
            None if cache.exists() => format!(
                "the image's layers, but {} holds copies of other images",
                cache.display()
            ),
            None => format!("the image's layers (nothing in {})", cache.display()),
        }
    }

    /// One run in a fresh project of the user's, timed.
    fn run(&self, ah: &Path, dir: &Path) -> Times {
        let project = project(dir, &self.user);
        let mock = MockServer::start(vec![
            Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({"command": "true"}))),
            Turn::reply(Reply::new().text("done")),
        ]);
        let url = mock.url();
        let env = [
            ("ANTHROPIC_BASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", "bench-key"),
            ("NO_COLOR", "1"),
        ];
        let started = Instant::now();
        let child = self
            .command(ah, &env)
            .arg("-C")
            .arg(&project)
            .args(["--review", "never", "--new", "bench"])
            .spawn()
            .expect("spawn runuser");
        mock.wait_for_requests(2, LIMIT);
        let first = started.elapsed();
        let answered = Instant::now();
        let out = child.wait_with_output().expect("wait for ah");
        let end = answered.elapsed();
        assert!(
            out.status.success(),
            "ah as {} failed ({}):\n{}",
            self.user,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let exited = Instant::now();
        assert!(
            crate::common::cleanup_over(&project, LIMIT),
            "{}: the sandbox is not removed after {LIMIT:?}",
            project.display()
        );
        Times {
            first,
            end,
            removal: exited.elapsed(),
        }
    }
}

/// A committed project of one file in a new folder of `dir`, owned by
/// `user`.
fn project(dir: &Path, user: &str) -> PathBuf {
    let project = tempfile::Builder::new()
        .prefix("project-")
        .tempdir_in(dir)
        .expect("project dir")
        .keep();
    std::fs::write(project.join("a.txt"), "one\n").expect("write");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", "initial"],
    ] {
        crate::common::git(&project, args);
    }
    let status = Command::new("chown")
        .args(["-R", &format!("{user}:")])
        .arg(&project)
        .status()
        .expect("run chown");
    assert!(status.success(), "chown to {user} failed");
    project
}

/// `median (min–max)` of `times`, and the median.
fn spread(times: impl Iterator<Item = Duration>) -> (String, Duration) {
    let mut times: Vec<Duration> = times.collect();
    times.sort();
    let median = times[times.len() / 2];
    let text = format!(
        "{} ({:.0}–{:.0})",
        ms(median),
        times[0].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0
    );
    (text, median)
}
