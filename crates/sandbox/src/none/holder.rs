//! The none backend's overlay: the project as the read-only lower layer of
//! a kernel overlay mounted on the run's `work` folder, so that a run
//! copies nothing and a step is recorded from the upper folder, as in a
//! podman run. The mount lives in a mount namespace of its own (and, for a
//! user other than root, an unprivileged user namespace that maps only the
//! user's own ids, so commands keep the user's uid and no capability), held
//! by a *holder*: `unshare` running a small `sh` script that mounts the
//! overlay, makes it its working folder and waits for its standard input
//! to close. That input is a pipe only ah holds, so the holder ends with ah
//! however ah ends (a SIGKILL too), and its mount with it: the host's mount
//! table never sees the overlay.
//!
//! Commands enter the namespaces with `nsenter -w` (the holder's working
//! folder, so `pwd` is the work folder's usual path); the host reaches the
//! merged view through `/proc/HOLDER/root` (`sandbox/src/merged.rs`).
//!
//! Where the namespaces or the overlay cannot be made (user namespaces
//! disabled, a kernel without unprivileged overlays, no util-linux), a
//! probe mount says so before the run chooses, and the run copies the
//! project instead, saying why.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use rustix::process::Pid;

use crate::podman::OverlayDirs;

/// The holder's script: a probe mount (`$1` on `$2`), then, once told to
/// go, the overlay itself (`$3` on `$4`), then waiting for its input to
/// close.
const SCRIPT: &str = r#"mount -t overlay overlay -o "$1" "$2" || exit 3
umount "$2" || exit 3
echo probed
read -r go || exit 0
mount -t overlay overlay -o "$3" "$4" || exit 4
cd "$4" || exit 4
echo ready
read -r _
"#;

/// A namespace holder (see the module's doc), probed and waiting to mount
/// the overlay.
#[derive(Debug)]
pub struct Holder {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    nsenter: PathBuf,
    /// In a user namespace of its own (ah runs as a user other than root).
    user_ns: bool,
    /// Where the overlay goes.
    at: PathBuf,
    probe: PathBuf,
}

impl Holder {
    /// Starts a holder for an overlay of `project` with the folders `dirs`
    /// (made later, by the run's preparation) mounted on `at`, and checks
    /// with a probe mount in `scratch` (a new folder, removed after) that
    /// the namespaces and the overlay can be made. Why not, if not.
    pub fn probe(
        project: &Path,
        dirs: &OverlayDirs,
        at: &Path,
        scratch: &Path,
    ) -> Result<Holder, String> {
        let tool = |name: &str| {
            which::which(name).map_err(|_| {
                format!("`{name}` was not found (install util-linux to spare the copy)")
            })
        };
        let (unshare, nsenter) = (tool("unshare")?, tool("nsenter")?);
        for path in [project, &dirs.upper, &dirs.work, at, scratch] {
            let bytes = path.as_os_str().as_encoded_bytes();
            if bytes.contains(&b',') || bytes.contains(&b':') {
                return Err(format!(
                    "an overlay cannot be mounted from {} (a path with ':' or ',')",
                    path.display()
                ));
            }
        }
        let user_ns = !rustix::process::geteuid().is_root();
        let options = |lower: &Path, upper: &Path, work: &Path| {
            let mut options = format!(
                "lowerdir={},upperdir={},workdir={}",
                lower.display(),
                upper.display(),
                work.display()
            );
            if user_ns {
                options.push_str(",userxattr");
            }
            options
        };
        let probe_dirs = ["l", "u", "w", "m"].map(|name| scratch.join(name));
        std::fs::create_dir(scratch)
            .and_then(|()| probe_dirs.iter().try_for_each(std::fs::create_dir))
            .map_err(|e| format!("could not make the probe folder {}: {e}", scratch.display()))?;
        let mut command = Command::new(unshare);
        if user_ns {
            command.args(["--user", "--map-current-user", "--keep-caps"]);
        }
        command
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                SCRIPT,
                "sh",
            ])
            .arg(options(&probe_dirs[0], &probe_dirs[1], &probe_dirs[2]))
            .arg(&probe_dirs[3])
            .arg(options(project, &dirs.upper, &dirs.work))
            .arg(at)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Not in ah's process group: ^C at the terminal is ah's to
            // handle, and must not take the work tree away.
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("could not start unshare: {e}"))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err("the namespace holder's pipes were not made".to_string());
        };
        let mut holder = Holder {
            child,
            input: Some(input),
            output: BufReader::new(output),
            nsenter,
            user_ns,
            at: at.to_path_buf(),
            probe: scratch.to_path_buf(),
        };
        let probed = holder.expect("probed");
        let _ = remove_scratch(scratch);
        probed.map_err(|why| format!("an overlay could not be mounted: {why}"))?;
        Ok(holder)
    }

    /// Mounts the overlay (its folders prepared by now) and returns the
    /// namespace the commands enter.
    pub fn mount(mut self) -> Result<Namespace, String> {
        std::fs::create_dir_all(&self.at)
            .map_err(|e| format!("could not make {}: {e}", self.at.display()))?;
        let told = match self.input.as_mut() {
            Some(input) => input.write_all(b"go\n").and_then(|()| input.flush()),
            None => Err(std::io::Error::other("its input is closed")),
        };
        told.map_err(|e| format!("could not tell the namespace holder to mount: {e}"))?;
        self.expect("ready")
            .map_err(|why| format!("the overlay of the project could not be mounted: {why}"))?;
        let pid = i32::try_from(self.child.id())
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| "the namespace holder's process id is out of range".to_string())?;
        let merged = crate::merged::Merged::open(pid, &self.at)
            .map_err(|e| format!("could not open the overlay's merged view: {e}"))?;
        Ok(Namespace {
            holder: self,
            pid,
            merged,
        })
    }

    /// Reads the holder's next line, which must be `word`; else what its
    /// standard error said.
    fn expect(&mut self, word: &str) -> Result<(), String> {
        let mut line = String::new();
        let read = self.output.read_line(&mut line);
        if matches!(read, Ok(n) if n > 0) && line.trim_end() == word {
            return Ok(());
        }
        let _ = self.child.kill();
        let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
        let mut said = String::new();
        if let Some(stderr) = self.child.stderr.as_mut() {
            let _ = stderr.take(4096).read_to_string(&mut said);
        }
        let said = said.trim();
        Err(match said.is_empty() {
            true => format!("unshare ended ({status})"),
            false => said.to_string(),
        })
    }

    /// Ends the holder: its mount goes with it.
    fn end(&mut self) {
        // Its input closed, the holder's script ends; the kill is for a
        // holder stuck anywhere else.
        self.input = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.end();
        if self.probe.exists() {
            let _ = remove_scratch(&self.probe);
        }
    }
}

/// The mounted overlay: where commands enter, and the host's merged view.
#[derive(Debug)]
pub struct Namespace {
    holder: Holder,
    pid: Pid,
    merged: crate::merged::Merged,
}

impl Namespace {
    /// A command that runs `program` inside the namespaces, in the merged
    /// work folder.
    pub fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.holder.nsenter);
        command.arg("-t").arg(self.pid.as_raw_nonzero().to_string());
        if self.holder.user_ns {
            command.args(["-U", "--preserve-credentials"]);
        }
        // `-w` alone: the holder's working folder, opened through its
        // `/proc` entry, so the merged view and not the folder beneath.
        command.args(["-m", "-w", "--", program]).current_dir("/");
        command
    }

    /// The merged view as a path the host can open folders beneath.
    pub fn view(&mut self) -> std::io::Result<PathBuf> {
        if !self.merged.alive() {
            return Err(std::io::Error::other(
                "the none backend's namespace holder ended: the work tree is gone",
            ));
        }
        self.merged.path()
    }

    /// Ends the holder (the overlay is unmounted with its namespace).
    pub fn end(&mut self) {
        self.merged.release();
        self.holder.end();
    }
}

/// Removes an overlay's scratch folder (or a folder of them), whose
/// `work/` the kernel made with no permissions: the user owns it, so it
/// may give them back first.
pub fn remove_scratch(dir: &Path) -> std::io::Result<()> {
    let inner = std::fs::read_dir(dir)?
        .flatten()
        .map(|entry| entry.path().join("work"));
    for work in std::iter::once(dir.join("work")).chain(inner) {
        let _ = rustix::fs::chmod(&work, rustix::fs::Mode::RWXU);
    }
    std::fs::remove_dir_all(dir)
}
