//! A snapshot of the whole run of `snapshot_run` at a real terminal
//! (tmux, 120 columns, `NO_COLOR=1`, `--backend none`), where a person
//! watches it: stdout and stderr on one screen in the order they came, the
//! live keys' line, the review shown and asked (`--review ask`, the default
//! there; Enter applies) and the end line. The spinner is drawn and cleared
//! as the run goes, so the pane's history once ah has exited holds only
//! what stays; what varies is replaced by `support::snap`.

use crate::snapshot_run::whole_run;
use crate::support::host::Host;
use crate::support::mock::MockServer;
use crate::support::snap;
use crate::support::tmux::{Tmux, ah_script};

#[test]
fn a_whole_run_at_a_terminal() {
    let host = Host::git(&[("greet.txt", "hello world\n")]);
    let mock = MockServer::start(whole_run());
    let script = ah_script(&host, &mock.url(), "'shorten the greeting'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(tmux.history());
}
