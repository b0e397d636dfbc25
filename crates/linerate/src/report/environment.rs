//! An environment snapshot as text: what `linerate show` prints under a run and what
//! `linerate doctor` prints for each host. Missing facts show as `n/a (reason)`.

use std::io::Write;

use linerate_proto::{Environment, Fact, InterfaceEnvironment};

use crate::record::RunRecord;
use crate::units::peer_text::{escape, every_string};

/// The environment of one end, under a heading such as `Environment (client)`.
/// Every string is shown escaped (`units::peer_text`): a peer's environment is its own.
pub fn render(heading: &str, received: &Environment, out: &mut dyn Write) -> std::io::Result<()> {
    let shown = every_string(received, escape);
    let e = shown.as_ref().unwrap_or(received);
    writeln!(out, "{}:", escape(heading))?;
    writeln!(
        out,
        "  system      {}, kernel {}, host {}",
        e.os.display(),
        e.kernel.display(),
        e.hostname.display()
    )?;
    let mhz = match &e.cpu.frequency_hz {
        Fact::Value(hz) => format!("{} MHz", hz / 1_000_000),
        na => na.display(),
    };
    writeln!(
        out,
        "  cpu         {} × {} at {}, governor {}",
        e.cpu.count.display(),
        e.cpu.model.display(),
        mhz,
        e.cpu.governor.display()
    )?;
    writeln!(out, "  virtual     {}", e.virtualization.display())?;
    if let Some(place) = crate::report::words::place_words(e.node.as_deref(), e.zone.as_deref()) {
        writeln!(out, "  placed on   {place}")?;
    }
    for (name, value) in &e.sysctls {
        writeln!(out, "  {name:<32} {}", value.display())?;
    }
    for i in &e.interfaces {
        interface(i, out)?;
    }
    Ok(())
}

/// Both ends' environments under a shown run (`linerate show`), or why one is missing.
pub fn render_ends(record: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    for (end, side) in record.sides() {
        match side.and_then(|s| s.environment.as_deref()) {
            Some(e) => render(&format!("Environment ({end})"), e, out)?,
            None => writeln!(out, "Environment ({end}): not recorded")?,
        }
    }
    Ok(())
}

fn interface(i: &InterfaceEnvironment, out: &mut dyn Write) -> std::io::Result<()> {
    let speed = match &i.speed_mbit_per_second {
        Fact::Value(m) => format!("{m} Mbit/s {}", i.duplex.value().map_or("", String::as_str)),
        na => na.display(),
    };
    writeln!(
        out,
        "  interface {} ({}): MTU {}, link {}, driver {}, queues rx {} tx {}",
        i.name,
        i.role,
        i.mtu_bytes.display(),
        speed.trim_end(),
        i.driver.display(),
        i.rx_queues.display(),
        i.tx_queues.display()
    )?;
    let offloads: Vec<String> = i
        .offloads
        .iter()
        .map(|(k, f)| {
            let v = match f {
                Fact::Value(true) => "on".to_string(),
                Fact::Value(false) => "off".to_string(),
                na => na.display(),
            };
            format!("{} {v}", k.to_uppercase().replace('_', "-"))
        })
        .collect();
    if !offloads.is_empty() {
        writeln!(out, "    offloads  {}", offloads.join(", "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_values_and_reasons() {
        let mut e = Environment::unavailable("not Linux (freebsd)");
        e.kernel = Fact::Value("14.1-RELEASE".into());
        e.sysctls.insert("net.core.rmem_max".into(), Fact::Value("212992".into()));
        e.interfaces.push(InterfaceEnvironment {
            name: "vmx0".into(),
            role: "test".into(),
            mtu_bytes: Fact::Value(9000),
            speed_mbit_per_second: Fact::Value(10_000),
            duplex: Fact::Value("full".into()),
            offloads: [("lro".to_string(), Fact::Value(false))].into(),
            ..InterfaceEnvironment::default()
        });
        let mut out = Vec::new();
        render("Environment (server)", &e, &mut out).expect("renders");
        let text = String::from_utf8(out).expect("utf8");
        assert!(text.starts_with("Environment (server):\n"), "{text}");
        assert!(text.contains("kernel 14.1-RELEASE, host n/a (not Linux (freebsd))"), "{text}");
        assert!(text.contains("net.core.rmem_max                212992"), "{text}");
        assert!(text.contains("interface vmx0 (test): MTU 9000, link 10000 Mbit/s full"), "{text}");
        assert!(text.contains("offloads  LRO off"), "{text}");
    }
}
