//! Tests of the podman arguments: what each option adds to `podman run`.

use super::*;

fn spec(work: &Path) -> RunSpec<'_> {
    RunSpec {
        name: "ah-r1",
        labels: vec![("ah.run", "r1".to_string())],
        root: Root::Image("localhost/ah-sandbox:latest"),
        runtime: Some("runc".to_string()),
        pids_limit: 512,
        memory: "2g",
        ulimits: Ulimits {
            nofile: 1000,
            nproc: 200,
        },
        data_limit: None,
        work_dir: work,
        overlay: None,
        init: Path::new("/usr/bin/catatonit"),
        agent: Some(Path::new("/tmp/ah-agent-x/ah")),
        pidfile: Some(Path::new("/tmp/ah-podman-x/init.pid")),
        attached: false,
        rootless: false,
        user: Some((0, 0)),
        network: Network::None,
        env: &[],
        remote: None,
    }
}

fn strings(args: &[OsString]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn run_args_make_a_closed_sandbox() {
    let args = strings(&run_args(&spec(Path::new("/w"))));
    for flag in [
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        "--network=none",
        "--read-only",
        "--pull=never",
        "--http-proxy=false",
        "--unsetenv-all",
        "--volume=/w:/work:rw",
        "--ulimit=nofile=1000:1000",
        "--ulimit=nproc=200:200",
        "--label=ah.run=r1",
        "--runtime=runc",
        "--user=0:0",
        "--volume=/usr/bin/catatonit:/run/ah-init:ro",
        "--volume=/tmp/ah-agent-x/ah:/run/ah-agent:ro",
        "--pidfile=/tmp/ah-podman-x/init.pid",
    ] {
        assert!(
            args.contains(&flag.to_string()),
            "missing {flag} in {args:?}"
        );
    }
    // The host is mounted nowhere but /work, the init and the agent.
    let volumes: Vec<&String> = args.iter().filter(|a| a.starts_with("--volume=")).collect();
    assert_eq!(volumes.len(), 3, "{volumes:?}");
    assert!(!args.iter().any(|a| a.contains("/project")), "{args:?}");
    assert!(!args.iter().any(|a| a.contains("keep-id")));
    // catatonit is PID 1 and starts nothing: no keeper process to spare.
    assert!(!args.contains(&"--init".to_string()));
    assert_eq!(
        &args[args.len() - 3..],
        ["localhost/ah-sandbox:latest", "/run/ah-init", "-P"]
    );
}

#[test]
fn a_copy_of_the_image_is_the_lower_layer_of_a_read_only_root() {
    let mut spec = spec(Path::new("/w"));
    spec.rootless = true;
    spec.root = Root::Copy(Path::new("/home/u/.cache/ah/rootfs/abc"));
    let args = strings(&run_args(&spec));
    assert_eq!(
        &args[args.len() - 4..],
        [
            "--rootfs",
            "/home/u/.cache/ah/rootfs/abc:O",
            "/run/ah-init",
            "-P"
        ]
    );
    for flag in ["--read-only", "--cap-drop=all", "--userns=keep-id"] {
        assert!(
            args.contains(&flag.to_string()),
            "missing {flag} in {args:?}"
        );
    }
    assert!(!args.iter().any(|a| a.contains("ah-sandbox")), "{args:?}");
}

#[test]
fn rootless_maps_the_caller_and_mounts_work_writable() {
    let mut spec = spec(Path::new("/w"));
    spec.rootless = true;
    let args = strings(&run_args(&spec));
    assert!(args.contains(&"--userns=keep-id".to_string()));
    assert!(!args.iter().any(|a| a.starts_with("--user=")));
    assert!(args.contains(&"--volume=/w:/work:rw".to_string()));
}

#[test]
fn an_overlay_work_names_its_lower_upper_and_scratch_folders() {
    let dirs = crate::podman::OverlayDirs {
        upper: "/r/upper".into(),
        work: "/r/overlay".into(),
    };
    let mut spec = spec(Path::new("/project"));
    spec.overlay = Some(&dirs);
    let args = strings(&run_args(&spec));
    assert!(
        args.contains(
            &"--volume=/project:/work:O,upperdir=/r/upper,workdir=/r/overlay".to_string()
        ),
        "{args:?}"
    );
}

#[test]
fn the_network_mode_picks_the_network_and_the_mounts() {
    let env = [("PATH".to_string(), CONTAINER_PATH.to_string())];
    let mut spec = spec(Path::new("/w"));
    spec.env = &env;
    spec.network = Network::Proxy {
        socket_dir: Path::new("/tmp/ah-egress-x"),
        ah: Path::new("/usr/bin/ah"),
    };
    let args = strings(&run_args(&spec));
    assert!(args.contains(&"--network=none".to_string()));
    assert!(args.contains(&"--volume=/tmp/ah-egress-x:/run/ah-egress:ro".to_string()));
    assert!(args.contains(&"--volume=/usr/bin/ah:/run/ah-bin:ro".to_string()));
    assert!(args.contains(&format!("--env=PATH={CONTAINER_PATH}")));
    assert_eq!(args.iter().filter(|a| a.starts_with("--env=")).count(), 1);
    spec.network = Network::Full("slirp4netns");
    let args = strings(&run_args(&spec));
    assert!(args.contains(&"--network=slirp4netns".to_string()));
    assert!(
        !args
            .iter()
            .any(|a| a.contains("/run/ah-") && !a.contains("ah-init") && !a.contains("ah-agent"))
    );
    spec.network = Network::Full("pasta");
    assert!(strings(&run_args(&spec)).contains(&"--network=pasta".to_string()));
}

#[test]
fn ulimits_never_exceed_the_host() {
    let host = HostLimits {
        nofile_hard: 20_000,
        nproc_hard: 96_365,
        pid_max: 32_768,
    };
    let got = Ulimits::WANTED.clamped(&host);
    assert_eq!(
        got,
        Ulimits {
            nofile: 20_000,
            nproc: 32_768
        }
    );
    let roomy = HostLimits {
        nofile_hard: u64::MAX,
        nproc_hard: 1000,
        pid_max: u64::MAX,
    };
    assert_eq!(Ulimits::WANTED.clamped(&roomy).nproc, 1000);
    assert_eq!(Ulimits::WANTED.clamped(&roomy).nofile, 65_536);
}

#[test]
fn host_limits_match_getrlimit_of_this_process() {
    let limits = HostLimits::read();
    let text = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let line = text.lines().find(|l| l.starts_with("Max open files"));
    if let Some(line) = line {
        let hard = line.split_whitespace().nth(4).unwrap_or("");
        let expected = if hard == "unlimited" {
            u64::MAX
        } else {
            hard.parse().unwrap_or(0)
        };
        assert_eq!(limits.nofile_hard, expected);
    }
    assert!(Ulimits::for_host().nofile <= limits.nofile_hard);
}

#[test]
fn a_data_limit_stands_in_for_a_memory_cgroup_only_when_asked() {
    let work = Path::new("/w");
    let without = strings(&run_args(&spec(work)));
    assert!(!without.iter().any(|a| a.starts_with("--ulimit=data")));
    let with = RunSpec {
        data_limit: Some(512 << 20),
        ..spec(work)
    };
    let args = strings(&run_args(&with));
    assert!(
        args.contains(&"--ulimit=data=536870912:536870912".to_string()),
        "{args:?}"
    );
}

#[test]
fn a_remote_engines_container_names_nothing_of_this_host() {
    let mut remote = spec(Path::new("/home/me/project"));
    remote.rootless = false;
    remote.user = Some((SANDBOX_UID, SANDBOX_UID));
    remote.remote = Some(RemoteMounts {
        base: "/home/remote/.local/share/containers/storage/volumes/ah-base-1/_data",
        base_volume: "ah-base-1",
        tools: "ah-tools-2",
    });
    let args = strings(&run_args(&remote));
    let mounts: Vec<&String> = args.iter().filter(|a| a.starts_with("--volume=")).collect();
    assert_eq!(
        mounts,
        [
            "--volume=/home/remote/.local/share/containers/storage/volumes/ah-base-1/_data:/work:O",
            "--volume=ah-base-1:/run/ah-baseline:ro",
            "--volume=ah-tools-2:/run/ah:ro",
        ]
    );
    assert!(
        !args
            .iter()
            .any(|a| a.contains("/home/me") || a.contains("catatonit") || a.contains("pidfile"))
    );
    assert!(!args.iter().any(|a| a.starts_with("--userns")), "{args:?}");
    assert_eq!(
        args[args.len() - 3..],
        ["localhost/ah-sandbox:latest", "/run/ah/init", "-P"]
    );
    for flag in [
        "--cap-drop=all",
        "--read-only",
        "--network=none",
        "--user=1000:1000",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag}: {args:?}");
    }
}
