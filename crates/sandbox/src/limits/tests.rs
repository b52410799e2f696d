use super::*;

fn asked(memory: &str, pids: u32) -> Asked {
    Asked {
        memory: memory.to_string(),
        pids,
        disk_budget: Some(10 << 30),
    }
}

const V1_ROOTLESS: Cgroups = Cgroups {
    version: 1,
    memory: false,
    pids: false,
};
const V1_ROOTFUL: Cgroups = Cgroups {
    version: 1,
    memory: true,
    pids: true,
};

#[test]
fn rootless_cgroup_v1_plans_stand_ins_and_says_how_they_differ() {
    let (limits, stand_ins) = plan(&asked("512m", 1024), V1_ROOTLESS, true);
    assert_eq!(
        stand_ins,
        StandIns {
            data: Some(512 << 20),
            nproc: Some(1024)
        }
    );
    let memory = &limits[0];
    assert_eq!((memory.limit.as_str(), memory.by), ("memory", By::Rlimit));
    assert!(!memory.as_asked());
    let said = memory.describe();
    assert!(
        said.contains("rootless podman on cgroup v1")
            && said.contains("per-process data limit of 512m")
            && said.contains("each process alone"),
        "{said}"
    );
    assert_eq!(limits[1].by, By::Rlimit);
    assert_eq!((limits[2].limit.as_str(), limits[2].by), ("disk", By::Ah));
}

#[test]
fn rootful_cgroup_v1_needs_no_stand_in() {
    let (limits, stand_ins) = plan(&asked("4g", 1024), V1_ROOTFUL, false);
    assert_eq!(stand_ins, StandIns::default());
    assert!(limits.iter().all(Held::as_asked), "{limits:?}");
}

#[test]
fn no_limit_asked_is_not_a_limit_missing() {
    let (limits, stand_ins) = plan(&asked("0", 0), V1_ROOTLESS, true);
    assert_eq!(stand_ins, StandIns::default());
    assert!(
        limits
            .iter()
            .all(|l| l.by == By::NotAsked || l.by == By::Ah)
    );
}

#[test]
fn the_host_backend_enforces_only_the_disk_budget() {
    let limits = plan_on_host(&asked("512m", 1024));
    assert_eq!(
        limits.iter().map(|l| l.by).collect::<Vec<_>>(),
        [By::None, By::None, By::Ah]
    );
    assert!(limits[0].describe().contains("--backend none"));
}

#[test]
fn the_check_corrects_the_plan_with_what_the_container_got() {
    let (planned, _) = plan(&asked("512m", 1024), V1_ROOTFUL, false);
    let enforced = Observed {
        cgroup_memory: Some(512 << 20),
        cgroup_pids: Some(1024),
        rlimit_data: None,
        rlimit_nproc: Some(32768),
    };
    assert_eq!(check(&planned, &enforced), planned);
    // Podman ignored the limits after all.
    let ignored = Observed {
        cgroup_memory: Some(9_223_372_036_854_771_712),
        cgroup_pids: None,
        rlimit_data: None,
        rlimit_nproc: Some(32768),
    };
    let checked = check(&planned, &ignored);
    assert_eq!(checked[0].by, By::None);
    assert!(
        checked[0].describe().contains("cgroup 9223372036854771712"),
        "{}",
        checked[0].describe()
    );
    assert_eq!(checked[1].by, By::None);
    // The stand-ins a rootless start set hold.
    let (planned, _) = plan(&asked("512m", 1024), V1_ROOTLESS, true);
    let stood_in = Observed {
        rlimit_data: Some(512 << 20),
        rlimit_nproc: Some(1024),
        ..ignored
    };
    assert_eq!(check(&planned, &stood_in), planned);
}

#[test]
fn cgroup_files_and_limits_are_found_for_v1_and_v2() {
    let root = Path::new("/sys/fs/cgroup");
    let hybrid = "9:pids:/libpod_parent/libpod-ab\n4:memory:/libpod_parent/libpod-ab\n0::/x\n";
    assert_eq!(
        cgroup_file(hybrid, root, "memory", "memory.limit_in_bytes"),
        Some(root.join("memory/libpod_parent/libpod-ab/memory.limit_in_bytes"))
    );
    assert_eq!(
        cgroup_file(hybrid, root, "pids", "pids.max"),
        Some(root.join("pids/libpod_parent/libpod-ab/pids.max"))
    );
    assert_eq!(
        unified_file("0::/user.slice/libpod-ab.scope\n", root, "memory.max"),
        Some(root.join("user.slice/libpod-ab.scope/memory.max"))
    );
    let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                  Max data size             536870912            536870912            bytes     \n\
                  Max processes             1024                 2048                 processes \n\
                  Max open files            unlimited            unlimited            files     \n";
    assert_eq!(hard_rlimit(limits, "Max data size"), Some(536_870_912));
    assert_eq!(hard_rlimit(limits, "Max processes"), Some(2048));
    assert_eq!(hard_rlimit(limits, "Max open files"), None);
    let proc_cgroups = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n\
                        memory\t4\t100\t1\npids\t8\t90\t0\n";
    assert!(v1_enabled(proc_cgroups, "memory"));
    assert!(!v1_enabled(proc_cgroups, "pids"));
}

#[test]
fn memory_sizes_read_as_podman_reads_them() {
    assert_eq!(memory_bytes("4g"), Some(4 << 30));
    assert_eq!(memory_bytes("512m"), Some(512 << 20));
    assert_eq!(memory_bytes("1.5GiB"), Some(3 << 29));
    assert_eq!(memory_bytes("2 GB"), Some(2 << 30));
    assert_eq!(memory_bytes("1048576"), Some(1 << 20));
    assert_eq!(memory_bytes("64k"), Some(64 << 10));
    for unlimited in ["0", "-1", "", "lots", "g", "1e9"] {
        assert_eq!(memory_bytes(unlimited), None, "{unlimited:?}");
    }
}

#[test]
fn allocation_failures_are_known_by_their_words() {
    assert!(says_out_of_memory(b"Traceback...\nMemoryError\n"));
    assert!(says_out_of_memory(b"tail: memory exhausted\n"));
    assert!(says_out_of_memory(b"fatal: Out of memory, malloc failed"));
    assert!(says_out_of_memory(
        b"memory allocation of 4096 bytes failed\n"
    ));
    assert!(!says_out_of_memory(b"error: no such file\n"));
}
