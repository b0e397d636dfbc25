//! `linerate generate kubernetes`: the options of the manifests (namespace, image, host
//! network, the Secret holding the key), checked here against Kubernetes' own naming rules so
//! that a bad name is refused with the rule, not by the API server at `kubectl apply`.

/// What `generate kubernetes` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesPlan {
    /// The manifests' options.
    pub options: KubernetesOptions,
    /// Write one file per object and a kustomization.yaml into this directory (the form of
    /// `deploy/kubernetes/base/`) instead of printing one stream.
    pub dir: Option<std::path::PathBuf>,
}

/// The options of the manifests; [`Default`] gives the committed base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesOptions {
    /// The namespace every object goes into (and the Namespace object's name).
    pub namespace: String,
    /// The image of the server and of the fleet Job.
    pub image: String,
    /// Agents on the node's network (`hostNetwork`): node-to-node figures without the pod
    /// network's overlay, at the price of a privileged namespace.
    pub host_network: bool,
    /// A Secret (key `psk`) holding the pre-shared key: servers require it, the Job proves it.
    pub psk_secret: Option<String>,
    /// The servers are agents (`--agent`) and a mesh Job runs beside the fleet Job: every node
    /// pair tested. Needs the key.
    pub mesh: bool,
    /// With `mesh`: the mesh is a CronJob on this cron schedule instead of a Job.
    pub schedule: Option<String>,
    /// With `mesh`: agents on the pod network and on each node's own network (a second
    /// DaemonSet), one mesh over both, each network's pairs set side by side.
    pub both_networks: bool,
}

/// The namespace of the committed manifests.
pub const DEFAULT_NAMESPACE: &str = "linerate";

impl Default for KubernetesOptions {
    fn default() -> Self {
        KubernetesOptions {
            namespace: DEFAULT_NAMESPACE.into(),
            image: default_image(),
            host_network: false,
            psk_secret: None,
            mesh: false,
            schedule: None,
            both_networks: false,
        }
    }
}

/// What `packaging/build-image.sh` tags: `localhost/linerate:VERSION`. A cluster pulls from a
/// registry: push it there and pass `--image` (or set kustomize's `images:`).
pub fn default_image() -> String {
    format!("localhost/linerate:{}", env!("CARGO_PKG_VERSION"))
}

impl KubernetesOptions {
    /// These options with the names checked: the namespace a DNS label (RFC 1123, at most
    /// 63 characters), the Secret a DNS subdomain (at most 253), the image one word.
    pub fn checked(self) -> Result<Self, String> {
        dns_name("--namespace", &self.namespace, 63, false)?;
        if self.mesh && self.psk_secret.is_none() {
            return Err("--mesh needs --psk-secret NAME: agents run tests only for a client \
                        with their key, and test only agents holding it"
                .into());
        }
        if self.both_networks && (!self.mesh || self.host_network) {
            return Err("--both-networks adds host-network agents beside the pod network's for \
                        one mesh over both: give --mesh, and not --host-network"
                .into());
        }
        if let Some(secret) = &self.psk_secret {
            dns_name("--psk-secret", secret, 253, true)?;
        }
        if let Some(cron) = &self.schedule {
            if !self.mesh {
                return Err("--schedule puts the mesh on a schedule: give --mesh too".into());
            }
            cron_schedule(cron)?;
        }
        if self.image.is_empty() || self.image.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "--image {:?} is not an image reference; write one like \
                 registry.example/linerate:0.1.0",
                self.image
            ));
        }
        Ok(self)
    }
}

/// A CronJob's schedule as Kubernetes takes it: five cron fields (minute, hour, day of month,
/// month, day of week) of digits, `*`, `/`, `-`, `,` or names (`mon`, `jan`), or one macro
/// (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`). The API server parses it fully;
/// this refuses what it certainly would, with the form to use.
fn cron_schedule(cron: &str) -> Result<(), String> {
    const MACROS: [&str; 6] = ["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly"];
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let field_ok = |f: &&str| f.bytes().all(|b| b.is_ascii_alphanumeric() || b"*/-,?".contains(&b));
    let ok = match fields.as_slice() {
        [one] => MACROS.contains(one),
        five if five.len() == 5 => five.iter().all(field_ok),
        _ => false,
    };
    if !ok {
        return Err(format!(
            "--schedule {cron:?} is not a cron schedule: five fields (minute hour day-of-month \
             month day-of-week), e.g. \"0 * * * *\" for every hour, or @hourly, @daily"
        ));
    }
    Ok(())
}

/// A Kubernetes name: lower-case letters, digits and `-` (and `.` between labels when
/// `dots`), starting and ending with a letter or digit, at most `max` characters.
fn dns_name(flag: &str, name: &str, max: usize, dots: bool) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let labels: Vec<&str> = if dots { name.split('.').collect() } else { vec![name] };
    if name.len() > max || !labels.iter().all(|l| label_ok(l)) {
        let what = if dots { "a DNS subdomain" } else { "a DNS label" };
        return Err(format!(
            "{flag} {name:?} is not {what}: lower-case letters, digits and '-'{}, starting and \
             ending with a letter or digit, at most {max} characters (e.g. linerate)",
            if dots { " ('.' between parts)" } else { "" }
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kubernetes_rules() {
        let with = |ns: &str, secret: Option<&str>, image: &str| {
            KubernetesOptions {
                namespace: ns.into(),
                image: image.into(),
                host_network: false,
                psk_secret: secret.map(String::from),
                mesh: false,
                schedule: None,
                both_networks: false,
            }
            .checked()
        };
        assert!(with("net-bench", Some("linerate.psk"), "reg.example/linerate:1").is_ok());
        for bad_ns in ["", "Linerate", "-x", "x-", "a.b", &"n".repeat(64)] {
            let e = with(bad_ns, None, "i").expect_err(bad_ns);
            assert!(e.contains("--namespace") && e.contains("DNS label"), "{e}");
        }
        let e = with("ns", Some("psk_key"), "i").expect_err("underscore");
        assert!(e.contains("--psk-secret") && e.contains("DNS subdomain"), "{e}");
        let e = with("ns", None, "linerate latest").expect_err("space");
        assert!(e.contains("--image"), "{e}");
        assert_eq!(KubernetesOptions::default().checked(), Ok(KubernetesOptions::default()));
    }

    #[test]
    fn both_networks_need_the_mesh_and_not_the_host_network_alone() {
        let with = |mesh: bool, host_network: bool| {
            KubernetesOptions {
                psk_secret: Some("k".into()),
                mesh,
                host_network,
                both_networks: true,
                ..KubernetesOptions::default()
            }
            .checked()
        };
        assert!(with(true, false).is_ok());
        for (mesh, host) in [(false, false), (true, true)] {
            let e = with(mesh, host).expect_err("refused");
            assert!(e.contains("--both-networks") && e.contains("--mesh"), "{e}");
        }
    }

    #[test]
    fn a_schedule_is_five_cron_fields_or_a_macro_and_needs_the_mesh() {
        let with = |mesh: bool, cron: &str| {
            KubernetesOptions {
                psk_secret: Some("k".into()),
                mesh,
                schedule: Some(cron.into()),
                ..KubernetesOptions::default()
            }
            .checked()
        };
        for good in ["0 * * * *", "*/15 2-4 * * mon-fri", "@hourly", "30 1 1,15 * ?"] {
            assert!(with(true, good).is_ok(), "{good}");
        }
        for bad in ["", "hourly", "0 * * *", "0 * * * * *", "0 * * * $(x)", "@often"] {
            let e = with(true, bad).expect_err(bad);
            assert!(e.contains("--schedule") && e.contains("five fields"), "{e}");
        }
        assert!(with(false, "@hourly").expect_err("no mesh").contains("--mesh"));
    }
}
