//! Running one command in the run's container: over the command channel
//! (`channel`) while its agent runs, with a `podman exec` of its own
//! (`exec`) where it cannot; a container that stopped is restarted, and
//! the proxy port handed over again after a restart. What the run is told
//! when the channel cannot be used is kept for [`PodmanBackend::notes`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{PodmanBackend, channel, exec, oom};
use crate::limits::says_out_of_memory;
use ah_tools::{ExecOutput, HitBy, MemoryLimitHit};

impl PodmanBackend {
    /// Runs `command` with `bash -c` in `/work`, over the command channel
    /// where it runs. When it exits, times out, or the future is dropped,
    /// every process in the container but its init is killed, whatever
    /// session or group it moved to. Execs of one backend run one at a
    /// time. Output is kept up to [`OUTPUT_CAP`](super::OUTPUT_CAP) bytes
    /// per stream.
    /// A container that stopped between steps (killed from outside, or its
    /// init ended just after the previous command) is restarted and the
    /// command tried once more, its errors saying so: podman refused it, so
    /// it never ran.
    pub async fn exec(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput> {
        match self.exec_once(command, timeout, true).await {
            Err(err) if exec::NotStarted::is(&err) => {
                let mut output = self.exec_once(command, timeout, true).await?;
                output
                    .stderr
                    .extend_from_slice(exec::RESTARTED_BEFORE_NOTE.as_bytes());
                Ok(output)
            }
            done => done,
        }
    }

    /// [`PodmanBackend::exec`] with a `podman exec` of its own, as where the
    /// command channel cannot run: to compare the two (`cargo bench --bench
    /// sandbox`) and to test that path. The channel, if any, is closed (the
    /// command's cleanup would kill its agent) and opened again by the next
    /// [`PodmanBackend::exec`].
    pub async fn exec_without_channel(
        &self,
        command: &str,
        timeout: Duration,
    ) -> std::io::Result<ExecOutput> {
        self.exec_once(command, timeout, false).await
    }

    /// Why commands run with one `podman exec` each instead of the command
    /// channel (empty when they use the channel), to show the user.
    pub fn notes(&self) -> Vec<String> {
        self.notes
            .lock()
            .map(|notes| notes.clone())
            .unwrap_or_default()
    }

    async fn exec_once(
        &self,
        command: &str,
        timeout: Duration,
        use_channel: bool,
    ) -> std::io::Result<ExecOutput> {
        let mut turn = Arc::clone(&self.turns).lock_owned().await;
        if let Some(remote) = &self.remote {
            remote.command_begins();
        }
        // Whatever ran in the container before ends with this command.
        self.sweeps.fetch_add(1, Ordering::Relaxed);
        // No merged view of an overlay /work is held while a command runs
        // (a restart would find its mount still in use): see `merged`.
        if let Some(merged) = self.merged.lock().await.as_mut() {
            merged.release();
        }
        if self.restarted.swap(false, Ordering::SeqCst) {
            // The restart ended the agent with everything else.
            turn.channel = None;
            // A restart made a new network namespace: its proxy port is new.
            if let Some(egress) = &self.egress
                && let Err(err) = egress.connect(&self.podman, &self.container).await
            {
                self.restarted.store(true, Ordering::SeqCst);
                return Err(std::io::Error::other(format!(
                    "the sandbox was restarted and its network proxy could not be set up again: {err}"
                )));
            }
        }
        if !use_channel {
            turn.channel = None;
        } else if self.use_channel.load(Ordering::SeqCst) {
            self.ready_channel(&mut turn).await?;
        }
        let kills_before = self.oom.as_ref().and_then(oom::OomCounter::kills);
        let run = match turn.channel.is_some() {
            true => {
                channel::run(
                    &self.podman,
                    &self.container,
                    turn,
                    &self.restarted,
                    command,
                    timeout,
                )
                .await
            }
            false => exec::run(
                &self.podman,
                &self.container,
                turn,
                &self.restarted,
                command,
                timeout,
            )
            .await
            .map(|output| (output, None)),
        };
        let (mut output, seen) = run?;
        let kills_after = self.oom.as_ref().and_then(oom::OomCounter::kills);
        // A remote engine's cgroups cannot be read from here: the agent's
        // word, from a cgroup that holds the limit asked.
        let by = if oom::fired(kills_before, kills_after)
            || (self.remote.is_some() && oom::seen_fired(&self.memory, seen))
        {
            Some(HitBy::Cgroup)
        } else if self.data_limit.is_some() && says_out_of_memory(&output.stderr) {
            Some(HitBy::DataLimit)
        } else {
            None
        };
        output.memory_limit_hit = by.map(|by| MemoryLimitHit {
            limit: self.memory.clone(),
            by,
        });
        Ok(output)
    }

    /// Makes sure `lane` holds a channel that answers, opening a new one
    /// when needed. Where the agent cannot run, commands go without the
    /// channel from now on; where podman refuses (the container stopped),
    /// the container is restarted and the command is [`exec::NotStarted`].
    async fn ready_channel(&self, lane: &mut channel::Lane) -> std::io::Result<()> {
        if let Some(channel) = lane.channel.as_mut()
            && channel.ready().await
        {
            return Ok(());
        }
        lane.channel = None;
        match channel::Channel::open(&self.podman, &self.container, &self.agent).await {
            Ok(opened) => {
                lane.channel = Some(opened);
                lane.opened += 1;
            }
            Err(channel::OpenError::Refused(why)) => {
                exec::restart(&self.podman, &self.container, &self.restarted).await;
                return Err(std::io::Error::other(exec::NotStarted::new(why)));
            }
            // A remote sandbox's changes travel only over the channel.
            Err(err) if self.remote.is_some() => {
                return Err(std::io::Error::other(format!(
                    "the sandbox's command channel could not be opened again: {}",
                    err.reason()
                )));
            }
            Err(err @ channel::OpenError::Unavailable(_)) => {
                self.use_channel.store(false, Ordering::SeqCst);
                if let Ok(mut notes) = self.notes.lock() {
                    notes.push(without_channel(&err.reason()));
                }
            }
        }
        Ok(())
    }
}

/// What the run is told when commands cannot use the command channel.
pub(super) fn without_channel(why: &str) -> String {
    format!(
        "commands run with one podman exec each (about 120 ms more per command): the \
         sandbox's command channel is unavailable: {why}"
    )
}
