//! A run by an unprivileged user: `ah` (the real binary, started with
//! `runuser`) runs its tools in rootless podman, inside a user namespace, and
//! the files it writes belong to that user. Needs root to switch users and
//! `AH_TEST_USER` naming the user (CI sets both).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::host::{describe, project_of, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{
    TestUser, no_container_left_by, podman_ready_blocking, sandbox_folders_gone,
};
use serde_json::json;

/// Where a rootless test runs: the test user (with podman and the image
/// ready), a folder it can reach holding a copy of ah and a committed
/// project of `files` that the user owns. `None` where rootless tests do
/// not run here.
struct UserProject {
    user: TestUser,
    /// The folder the user can reach, holding ah and the project.
    root: tempfile::TempDir,
    ah: PathBuf,
    project: PathBuf,
}

impl UserProject {
    /// `ah -C PROJECT ARGS` run as the user, the model at `mock`, with
    /// `env` besides what every run here needs.
    fn ah(&self, mock: &MockServer, env: &[(&str, &str)], args: &[&str]) -> Output {
        self.command(mock, env, args).output().unwrap()
    }

    /// [`UserProject::ah`], not started yet.
    fn command(&self, mock: &MockServer, env: &[(&str, &str)], args: &[&str]) -> Command {
        let url = mock.url();
        let mut all = vec![
            ("ANTHROPIC_BASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", "test-key"),
            ("NO_COLOR", "1"),
        ];
        all.extend_from_slice(env);
        let mut command = self.user.command(&self.ah, &all);
        command.arg("-C").arg(&self.project).args(args);
        command
    }
}

fn user_project(files: &[(&str, &str)]) -> Option<UserProject> {
    let user = TestUser::from_env()?;
    podman_ready_blocking()?;
    user.build_image();
    let (root, ah) = user.reachable_copy(Path::new(env!("CARGO_BIN_EXE_ah")));
    let project = root.path().join("project");
    project_of(&user, &project, files);
    Some(UserProject {
        user,
        root,
        ah,
        project,
    })
}

#[test]
fn an_unprivileged_user_runs_tools_in_rootless_podman() {
    // Everything the user touches lives in a folder it can reach, whatever
    // the permissions of the checkout: the project, and a copy of ah.
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let (user, project) = (&p.user, &p.project);

    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "id -u; cat /proc/self/uid_map; echo made > made.txt; touch /x || echo ro; \
                tr '\\0' ' ' < /proc/$PPID/cmdline"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let committer = [
        ("GIT_AUTHOR_NAME", "u"),
        ("GIT_AUTHOR_EMAIL", "u@u"),
        ("GIT_COMMITTER_NAME", "u"),
        ("GIT_COMMITTER_EMAIL", "u@u"),
    ];
    let out = p.ah(&mock, &committer, &["--review", "auto", "make a file"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    let told = requests[1].told();
    let mut lines = told.lines();
    assert_eq!(
        lines.next(),
        Some(user.uid.to_string().as_str()),
        "keep-id keeps the user's uid:\n{told}"
    );
    assert!(
        !told.contains("4294967295"),
        "the tools run in a user namespace, not with the host's full uid range:\n{told}"
    );
    assert!(told.contains("ro"), "the root is read-only:\n{told}");
    assert!(
        told.contains("/run/ah-agent __sandbox-agent"),
        "the command ran under the channel's agent:\n{told}"
    );

    // The run's /work was an overlay of the project (nothing copied), and
    // nothing of it is left once its cleanup is over: the scratch folder
    // holds a folder only the user namespace may remove.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("copying the project"),
        "{}",
        describe(&out)
    );
    let runs: Vec<_> = std::fs::read_dir(project.join(".ah/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    sandbox_folders_gone(&runs[0]);

    let made = project.join("made.txt");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), "made\n");
    assert_eq!(
        std::fs::metadata(&made).unwrap().uid(),
        user.uid,
        "the user owns what the model wrote"
    );
    let log = user
        .command(Path::new("/usr/bin/git"), &[])
        .arg("-C")
        .arg(project)
        .args(["log", "-1", "--format=%s"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout).trim(),
        "ah: make a file"
    );
}

#[test]
fn an_unprivileged_users_run_without_tools_ends_at_once_and_its_sandbox_goes_after() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("nothing to do"))]);
    let out = p.ah(&mock, &[], &["--review", "never", "nothing"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let runs: Vec<_> = std::fs::read_dir(p.project.join(".ah/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let id = runs[0].file_name().unwrap().to_str().unwrap().to_string();
    // The cleanup, in the user's own podman, outlived ah and left nothing.
    no_container_left_by(&id, |id| p.user.containers_of(&podman, id));
    sandbox_folders_gone(&runs[0]);
}

#[test]
fn an_unprivileged_user_goes_on_from_a_saved_run_without_a_copy() {
    let Some(p) = user_project(&[("a.txt", "one\n"), ("docs/b.txt", "b\n")]) else {
        return;
    };
    let (user, project) = (&p.user, &p.project);
    let run = |steps: &str| {
        let mock = MockServer::start(vec![
            Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({ "command": steps }))),
            Turn::reply(Reply::new().text("done")),
        ]);
        let out = p.ah(&mock, &[], &["--review", "never", "go on"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        mock.requests()[1].told()
    };
    run("echo two > a.txt && rm -r docs && mkdir -p n && echo n > n/x && ln -s n/x l");
    // The saved run's files are restored over the project in the user
    // namespace: whiteouts, new folders, links.
    let told = run(
        "cat a.txt n/x l; ls; ls -ln a.txt | cut -d' ' -f3; grep ' /work ' /proc/self/mountinfo",
    );
    let mut lines = told.lines();
    assert_eq!(lines.next(), Some("two"), "{told}");
    assert_eq!(lines.next(), Some("n"), "{told}");
    assert_eq!(lines.next(), Some("n"), "{told}");
    assert_eq!(
        lines.by_ref().take(3).collect::<Vec<_>>(),
        ["a.txt", "l", "n"],
        "{told}"
    );
    assert_eq!(lines.next(), Some(user.uid.to_string().as_str()), "{told}");
    assert!(told.contains(" - overlay "), "{told}");
    assert_eq!(
        std::fs::read_to_string(project.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(project.join("docs/b.txt").exists() && !project.join("n").exists());
}

#[test]
fn a_project_file_the_user_cannot_read_fails_the_start_after_the_model_was_asked() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let project = &p.project;
    // Root's, not the user's: its name can be listed, its bytes not read.
    let locked = project.join("root-only.bin");
    std::fs::write(&locked, "root\n").unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    // The model is asked while the baseline is read; its tool call waits
    // for the baseline, which fails: the start's error ends the run.
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "echo ran > b.txt"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = p.ah(&mock, &[], &["--review", "never", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("could not read the project's files for the run's baseline")
            && stderr.contains("root-only.bin"),
        "{stderr}"
    );
    assert!(
        mock.requests().len() <= 1,
        "no tool result reached the model"
    );
    assert!(!project.join("b.txt").exists());
}

#[test]
fn another_user_cannot_run_what_the_users_sandbox_made_set_uid() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    // The project's folder is open to every user (the temp folder is 0755).
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "cp /usr/bin/id ./id && chmod 4755 ./id && sleep 15"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let child = p
        .command(&mock, &[], &["--review", "never", "make an id"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let runs = p.project.join(".ah/runs");
    let planted = || {
        std::fs::read_dir(&runs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|run| run.path().join("upper/id"))
            .find(|id| {
                std::fs::symlink_metadata(id).is_ok_and(|m| m.permissions().mode() & 0o4000 != 0)
            })
    };
    wait_until("the set-uid copy of id", Duration::from_secs(120), || {
        planted().is_some()
    });
    let planted = planted().unwrap();
    assert_eq!(
        std::fs::metadata(&planted).unwrap().uid(),
        p.user.uid,
        "the user's own"
    );
    let tried = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&planted)
        .output()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = describe(&tried);
    assert!(
        !said.contains("euid=") && said.contains("Permission denied"),
        "another user ran it: {said}"
    );
}

#[test]
fn an_unprivileged_user_runs_the_none_backend_in_an_overlay() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let (user, project) = (&p.user, &p.project);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "id -u; pwd; grep CapEff /proc/self/status; echo made > made.txt; \
                echo two >> a.txt"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = p.ah(
        &mock,
        &[],
        &["--backend", "none", "--review", "never", "make a file"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("copying the project"),
        "{}",
        describe(&out)
    );
    let told = mock.requests()[1].told();
    let mut lines = told.lines();
    assert_eq!(lines.next(), Some(user.uid.to_string().as_str()), "{told}");
    let run = std::fs::read_dir(project.join(".ah/runs"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    assert_eq!(
        lines.next(),
        Some(&*run.join("work").to_string_lossy()),
        "{told}"
    );
    assert_eq!(
        lines.next(),
        Some("CapEff:\t0000000000000000"),
        "commands hold no capability:\n{told}"
    );
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+made") && patch.contains("+two"), "{patch}");
    assert_eq!(
        std::fs::read_to_string(project.join("a.txt")).unwrap(),
        "one\n"
    );
    // The run's overlay folders, scratch included, were removed as the user.
    for gone in ["work", "upper", "overlay"] {
        assert!(!run.join(gone).exists(), "{gone} is left");
    }
}

#[test]
fn rootless_memory_past_the_limit_is_stopped_by_the_stand_in_and_said_so() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    if ah_sandbox::limits::Cgroups::for_containers(true).memory {
        // Delegated cgroups here: the cgroup holds, as rootful.
        return;
    }
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": crate::limits::ALLOCATE_2G}),
        )),
        Turn::reply(Reply::new().tool_use(
            "toolu_2",
            "bash",
            json!({"command": "git init -q /tmp/r && git -C /tmp/r status --short && python3 -c 'print(6 * 7)'"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = p.ah(
        &mock,
        &[],
        &["--memory", "512m", "--review", "never", "use memory"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "limits not as asked: memory 512m: not enforced by a cgroup (rootless podman on \
             cgroup v1); a per-process data limit of 512m stands in"
        ) && stderr.contains("pids 1024: not enforced by a cgroup"),
        "one start line says what stands in:\n{stderr}"
    );
    assert!(
        !stderr.contains("podman exec each"),
        "the channel's agent runs: {stderr}"
    );
    let requests = mock.requests();
    let killed = requests[1].told();
    assert!(
        killed.contains("[ah: the sandbox's memory limit (512m) was hit during this command: an allocation was refused")
            && !killed.contains("allocated 2147483648"),
        "the stand-in stopped the allocation and the model is told:\n{killed}"
    );
    assert_eq!(
        requests[2].told(),
        "42\nexit code: 0",
        "git and python work under it"
    );

    let runs = p.project.join(".ah/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let manifest = crate::support::host::json_file(&run.join("manifest.json"));
    let memory = crate::limits::entry(&manifest["limits"], "memory");
    assert_eq!(memory["by"], json!("rlimit"), "{manifest}");
    assert_eq!(
        crate::limits::entry(&manifest["limits"], "pids")["by"],
        json!("rlimit")
    );
}

#[test]
fn rootless_strict_limits_refuses_where_the_memory_cgroup_does_not_apply() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    if ah_sandbox::limits::Cgroups::for_containers(true).memory {
        return;
    }
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let out = p.ah(&mock, &[], &["--strict-limits", "--memory", "512m", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to run (--strict-limits): memory 512m: not enforced by a cgroup")
            && stderr.contains("ah doctor"),
        "{stderr}"
    );
    assert!(mock.requests().is_empty(), "the model was never asked");
}

/// `podman ARGS` as the project's user: its trimmed output, or a panic
/// with podman's words.
fn user_podman(p: &UserProject, args: &[&str]) -> String {
    let out = p
        .user
        .command(Path::new("/usr/bin/podman"), &[])
        .args(args)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(out.status.success(), "podman {args:?}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The user's copies of image roots, where podman's storage is vfs (where
/// it shares layers, runs start from the image and there is nothing to
/// test: `None`).
fn root_copies(p: &UserProject) -> Option<PathBuf> {
    let driver = user_podman(p, &["info", "--format", "{{.Store.GraphDriverName}}"]);
    (driver == "vfs").then(|| p.user.home.join(".cache/ah/rootfs"))
}

/// The names in `dir`.
fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_rebuilt_image_gets_a_root_of_its_own_at_the_next_run() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let Some(copies) = root_copies(&p) else {
        return;
    };
    // A new image id, as a rebuild makes: the sandbox image with a label.
    let tag = ulid::Ulid::generate().to_string().to_lowercase();
    let (image, maker) = (
        format!("localhost/ah-test-rebuilt:{tag}"),
        format!("ah-test-rebuild-{tag}"),
    );
    user_podman(
        &p,
        &[
            "create",
            "--name",
            &maker,
            ah_sandbox::podman::DEFAULT_IMAGE,
            "true",
        ],
    );
    user_podman(
        &p,
        &[
            "commit",
            "-q",
            "--change",
            "LABEL=ah.test=rebuilt",
            &maker,
            &image,
        ],
    );
    user_podman(&p, &["rm", &maker]);
    let id = user_podman(&p, &["image", "inspect", "--format", "{{.Id}}", &image]);

    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({"command": "echo from-copy"}))),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = p.ah(
        &mock,
        &[("AH_IMAGE", &image)],
        &["--review", "never", "look"],
    );
    let made = copies.join(&id).is_dir();
    user_podman(&p, &["rmi", "-f", &image]);
    user_podman(
        &p,
        &[
            "unshare",
            "rm",
            "-rf",
            &copies.join(&id).display().to_string(),
        ],
    );
    let _ = std::fs::remove_file(copies.join(format!("{id}.lock")));

    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("copy of the whole image"),
        "{}",
        describe(&out)
    );
    assert!(
        made,
        "the new image's root was copied into {}",
        copies.display()
    );
    assert!(mock.requests()[1].told().contains("from-copy"));
    let mode = std::fs::metadata(&copies).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the copies are the user's alone");
    assert!(
        !names_in(&copies)
            .iter()
            .any(|n| n.starts_with(".building-")),
        "no half-made copy is left: {:?}",
        names_in(&copies)
    );
}

#[test]
fn a_project_image_built_with_ah_image_build_has_its_root_copied_before_its_first_run() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let Some(copies) = root_copies(&p) else {
        return;
    };
    // A project's Containerfile: the sandbox image and a tool of its own.
    let context = p.root.path().join("image");
    std::fs::create_dir(&context).unwrap();
    let tool = context.join("project-tool");
    std::fs::write(&tool, "#!/bin/sh\necho project-tool-ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let containerfile = context.join("Containerfile");
    std::fs::write(
        &containerfile,
        format!(
            "FROM {}\nCOPY project-tool /usr/local/bin/project-tool\n",
            ah_sandbox::podman::DEFAULT_IMAGE
        ),
    )
    .unwrap();
    p.user.chown(&context);
    let tag = ulid::Ulid::generate().to_string().to_lowercase();
    let image = format!("localhost/ah-test-project:{tag}");

    let built = p
        .user
        .command(&p.ah, &[("NO_COLOR", "1")])
        .args(["image", "build", "--image", &image, "--file"])
        .arg(&containerfile)
        .current_dir("/")
        .output()
        .unwrap();
    let id = (built.status.success())
        .then(|| user_podman(&p, &["image", "inspect", "--format", "{{.Id}}", &image]));
    let copy = id.as_ref().map(|id| copies.join(id));
    let made_by_build = copy
        .as_ref()
        .and_then(|copy| std::fs::metadata(copy).ok())
        .map(|meta| meta.ino());
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({"command": "project-tool"}))),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = id.as_ref().map(|_| {
        p.ah(
            &mock,
            &[("AH_IMAGE", &image)],
            &["--review", "never", "use the tool"],
        )
    });
    let used = copy
        .as_ref()
        .and_then(|copy| std::fs::metadata(copy).ok())
        .map(|meta| meta.ino());
    let _ = p
        .user
        .command(Path::new("/usr/bin/podman"), &[])
        .args(["rmi", "-f", &image])
        .current_dir("/")
        .output();
    if let (Some(id), Some(copy)) = (&id, &copy) {
        user_podman(&p, &["unshare", "rm", "-rf", &copy.display().to_string()]);
        let _ = std::fs::remove_file(copies.join(format!("{id}.lock")));
    }

    assert!(
        built.status.success(),
        "ah image build --file: {}",
        describe(&built)
    );
    assert!(
        made_by_build.is_some(),
        "ah image build copied the project image's root into {}: {}",
        copies.display(),
        describe(&built)
    );
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        used, made_by_build,
        "the run stood on the copy the build made"
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("copy of the whole image"),
        "{}",
        describe(&out)
    );
    assert!(mock.requests()[1].told().contains("project-tool-ran"));
}

#[test]
fn a_rootless_run_killed_with_sigkill_leaves_nothing_the_next_run_does_not_sweep() {
    let Some(p) = user_project(&[("a.txt", "one\n")]) else {
        return;
    };
    let Some(copies) = root_copies(&p) else {
        return;
    };
    let mock = MockServer::start(vec![Turn::reply(Reply::new().tool_use(
        "toolu_1",
        "bash",
        json!({"command": "touch /tmp/going; sleep 300"}),
    ))]);
    let mut child = p
        .command(&mock, &[], &["--review", "never", "wait"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let runs = p.project.join(".ah/runs");
    wait_until("the run's folder", Duration::from_secs(120), || {
        names_in(&runs).len() == 1
    });
    let killed = names_in(&runs).remove(0);
    let label = format!("label=ah.run={killed}");
    let gone = || user_podman(&p, &["ps", "-a", "-q", "--filter", &label]).is_empty();
    wait_until("the step to run", Duration::from_secs(120), || {
        !gone() && mock.requests().len() == 1
    });
    std::thread::sleep(Duration::from_millis(500));
    // ah itself, not runuser: the process of the user running the copy.
    let ah = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == p.ah)
                && std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == p.user.uid)
        })
        .expect("the running ah");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(ah).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    child.wait().unwrap();
    assert!(!gone(), "SIGKILL left the run's container");

    let next = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({"command": "echo next"}))),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = p.ah(&next, &[], &["--review", "never", "-n", "again"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        gone(),
        "the next run swept the killed run's container: {}",
        describe(&out)
    );
    assert!(
        !names_in(&copies)
            .iter()
            .any(|n| n.starts_with(".building-")),
        "{:?}",
        names_in(&copies)
    );
}
