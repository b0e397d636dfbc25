//! The Kubernetes manifests have one source, `linerate generate kubernetes`
//! (`report/kubernetes.rs`): the committed base (`deploy/kubernetes/base/`) is its output byte
//! for byte, and each overlay, rendered by `kubectl kustomize`, is the same objects as the
//! output with the matching options, rendered the same way (so key order and layout do not
//! count, every value does). CI validates them against Kubernetes' schemas
//! (`.ci/kubernetes-validate`).
//!
//! Needs kubectl (its built-in kustomize): under CI=true a missing kubectl fails; elsewhere
//! these tests are skipped with a note.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::{run, test_dir};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

fn kubectl_available() -> bool {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl is not installed: CI must run these tests (install kubectl; .ci/run says how)"
        );
        eprintln!("skipped: kubectl is not installed (these run in CI)");
    }
    found
}

/// `kubectl kustomize DIR`: the objects, in kustomize's order and layout.
fn kustomize(dir: &Path) -> String {
    let out = Command::new("kubectl").arg("kustomize").arg(dir).output().expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// `linerate generate kubernetes ARGS`, rendered by kustomize as a resource of its own.
fn generated(name: &str, args: &[&str]) -> String {
    let out = run(&[&["generate", "kubernetes"], args].concat(), Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "generate kubernetes {args:?}: {}", out.stderr);
    let dir = test_dir(&format!("k8s-{name}"));
    std::fs::write(dir.join("all.yaml"), &out.stdout).expect("write");
    std::fs::write(
        dir.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- all.yaml\n",
    )
    .expect("write");
    kustomize(&dir)
}

#[test]
fn the_committed_base_is_the_generators_output() {
    let dir = test_dir("k8s-base-files");
    let out = run(
        &["generate", "kubernetes", "--dir", dir.to_str().expect("path")],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let base = deploy().join("base");
    assert_eq!(
        names(&base),
        names(&dir),
        "deploy/kubernetes/base/ holds other files than the generator writes"
    );
    for name in names(&dir) {
        let want = std::fs::read_to_string(dir.join(&name)).expect("read");
        let got = std::fs::read_to_string(base.join(&name)).expect("read");
        assert_eq!(
            got, want,
            "deploy/kubernetes/base/{name} is not what the generator writes: run \
             `cargo run -- generate kubernetes --dir deploy/kubernetes/base`"
        );
    }
}

#[test]
fn each_overlay_is_the_generator_with_its_options() {
    if !kubectl_available() {
        return;
    }
    let cases: [(&str, &[&str]); 6] = [
        ("base", &[]),
        ("overlays/host-network", &["--host-network"]),
        ("overlays/psk", &["--psk-secret", "linerate-psk"]),
        ("overlays/mesh", &["--psk-secret", "linerate-psk", "--mesh"]),
        (
            "overlays/mesh-schedule",
            &["--psk-secret", "linerate-psk", "--mesh", "--schedule", "0 * * * *"],
        ),
        ("overlays/mesh-networks", &["--psk-secret", "linerate-psk", "--mesh", "--both-networks"]),
    ];
    let mut rendered = Vec::new();
    for (dir, args) in cases {
        let committed = kustomize(&deploy().join(dir));
        let from_generator = generated(&dir.replace('/', "-"), args);
        assert_eq!(
            committed, from_generator,
            "kubectl kustomize deploy/kubernetes/{dir} and generate kubernetes {args:?} differ"
        );
        rendered.push(committed);
    }
    // Not vacuous: each overlay changes the objects, and so does each option.
    assert_ne!(rendered[0], rendered[1]);
    assert_ne!(rendered[0], rendered[2]);
    assert_ne!(rendered[2], rendered[3]);
    assert_ne!(rendered[3], rendered[4]);
    assert_ne!(rendered[3], rendered[5]);
    for want in
        ["name: linerate-server-host", "name: linerate-host", "--network=pod", "--network=host"]
    {
        assert!(rendered[5].contains(want), "the both-networks overlay lacks {want}");
    }
    let elsewhere =
        generated("namespace", &["--namespace", "bench", "--image", "reg.example/linerate:1"]);
    assert_ne!(elsewhere, rendered[0]);
    assert!(
        !elsewhere.contains("namespace: linerate\n")
            && elsewhere.contains("image: reg.example/linerate:1"),
        "{elsewhere}"
    );
}

/// The containers' arguments are this binary's commands, with every option: a flag renamed
/// in the CLI fails here, not in a cluster. (packaging/check-image.sh runs them.)
#[test]
fn the_containers_run_commands_this_linerate_accepts() {
    use linerate::plan::kubernetes::KubernetesOptions;
    let dir = test_dir("k8s-args");
    let key = dir.join("psk");
    std::fs::write(&key, "a key of thirty-two bytes, or so\n").expect("write");
    let mut checked = 0;
    for (host_network, psk, mesh, schedule, both_networks) in [
        (false, false, false, None, false),
        (true, true, false, None, false),
        (false, true, true, None, false),
        (false, true, true, Some("@hourly"), false),
        (false, true, true, None, true),
    ] {
        let options = KubernetesOptions {
            host_network,
            psk_secret: psk.then(|| "linerate-psk".to_string()),
            mesh,
            schedule: schedule.map(String::from),
            both_networks,
            ..KubernetesOptions::default()
        };
        for m in linerate::report::kubernetes::manifests(&options) {
            let spec = match m.object["kind"].as_str() {
                Some("CronJob") => &m.object["spec"]["jobTemplate"]["spec"],
                _ => &m.object["spec"],
            };
            let Some(args) = spec["template"]["spec"]["containers"][0]["args"].as_array() else {
                continue;
            };
            // What the kubelet and the Secret's mount supply.
            let args: Vec<String> = args
                .iter()
                .map(|a| a.as_str().expect("a string").replace("$(POD_IP)", "127.0.0.1"))
                .map(|a| a.replace("/etc/linerate/psk/psk", key.to_str().expect("path")))
                .collect();
            let argv = std::iter::once("linerate".to_string()).chain(args.iter().cloned());
            if let Err(e) = linerate::cli::parse(argv) {
                panic!("{}: `linerate {}` does not parse: {e}", m.file, args.join(" "));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 14, "the DaemonSets', the Jobs' and the CronJob's arguments, five times");
}

#[test]
fn bad_names_are_refused_with_the_rule() {
    let out = run(&["generate", "kubernetes", "--namespace", "Bench_1"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("DNS label"), "{}", out.stderr);
    let out = run(&["generate", "bash", "--host-network"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("generate kubernetes"), "{}", out.stderr);
}
