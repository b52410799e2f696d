//! Keeps what appears in the project during an overlay run out of the
//! sandbox, for the whole run: before and after every step the run asks its
//! watch what appeared ([`crate::overlay::LateFiles`]) and hides it through
//! the merged view (an unlink there is a whiteout in the upper folder; the
//! project is never written). What appeared while a step ran may have been
//! read by it, and so may what appeared between steps while an MCP server
//! ran: that step is withheld — the model gets no output of it, and its
//! changes are undone — and the servers are ended. A file that cannot be
//! hidden poisons the run.

use std::path::Path;
use std::time::{Duration, Instant};

use super::Run;
use crate::workspace::remove_beneath;
use ah_tools::ToolOutput;
use ah_tools::fs_beneath::dir::DirHandle;

/// How long hiding what appeared may take.
const HIDE_SECONDS: u64 = 120;

impl Run {
    /// Hides from the sandbox, through the merged view `root`, what
    /// appeared in the project since the last check; the paths hidden
    /// (shown lossily). Poisons the run when they cannot be found or
    /// hidden.
    pub(super) async fn hide_late(&mut self, root: &Path) -> Vec<String> {
        let Some(late) = self.late.as_mut() else {
            return Vec::new();
        };
        let policy = &self.policy;
        let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
        let shadow = &self.shadow;
        let found = late.check(&withhold, || shadow.name_check().map_err(|e| e.to_string()));
        let paths = match found {
            Ok(paths) => paths,
            Err(err) => {
                self.poisoned.get_or_insert(format!(
                    "what appeared in the project could not be checked: {err}"
                ));
                return Vec::new();
            }
        };
        if paths.is_empty() {
            return Vec::new();
        }
        let deadline = Instant::now() + Duration::from_secs(HIDE_SECONDS);
        let hidden = DirHandle::open_root(root).and_then(|merged| {
            for path in &paths {
                remove_beneath(&merged, &String::from_utf8_lossy(path), deadline)?;
            }
            Ok(())
        });
        let shown: Vec<String> = paths
            .iter()
            .map(|path| String::from_utf8_lossy(path).into_owned())
            .collect();
        let pushed = match hidden {
            Ok(()) => self.backend.push(Some(&shown)).await,
            Err(err) => Err(err),
        };
        if let Err(err) = pushed {
            self.poisoned.get_or_insert(format!(
                "{} appeared in the project and could not be hidden from the sandbox: {err}",
                shown.join(", ")
            ));
        }
        for path in &shown {
            if self.policy.withheld_by(Path::new(path)).is_some() && !self.withheld.contains(path) {
                self.withheld.push(path.clone());
            }
        }
        shown
    }

    /// Withholds step `step`'s output (the model gets a note instead) and
    /// undoes what it changed, through the merged view `root`: `appeared`
    /// was visible to the sandbox while it ran.
    pub(super) async fn withhold_step(
        &mut self,
        step: u32,
        root: &Path,
        appeared: &[String],
        output: &mut ToolOutput,
    ) {
        let mut note = format!(
            "[ah: step {step}'s output is withheld and its changes are undone: {} appeared in \
             the project while it ran, and the sandbox could see it until now (it is hidden \
             now). Run the step again if you need it.]",
            appeared.join(", ")
        );
        if output.may_change_files {
            self.shadow.rebind(root);
            let reverted = self.shadow.revert_to(self.head).map_err(|e| e.to_string());
            // What the step changed is not known: anything may have been.
            let pushed = match reverted {
                Ok(_) => self.backend.push(None).await.map_err(|e| e.to_string()),
                Err(err) => Err(err),
            };
            if let Err(err) = pushed {
                self.poisoned.get_or_insert(format!(
                    "step {step} could not be undone after a file appeared in the project: {err}"
                ));
                note.push_str(&format!(
                    "\n[ah: the step could not be undone ({err}): the run is stopped]"
                ));
            }
        }
        let mut withheld = ToolOutput::error(note);
        withheld.may_change_files = false;
        *output = withheld;
    }
}
