//! `linerate doctor`'s report as text or as a `linerate.doctor` JSON document.

use std::io::Write;

use linerate_proto::Fact;

use crate::stats::doctor::{DoctorReport, RemoteFacts, bdp_bytes};
use crate::units::format_bits_per_second;
use crate::units::peer_text::escape;

/// Version of the `linerate.doctor` document.
pub const DOCTOR_SCHEMA_VERSION: u32 = 1;

/// Renders the report.
pub fn render(r: &DoctorReport, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if json {
        let mut v = serde_json::to_value(r).map_err(std::io::Error::other)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("schema_version".into(), DOCTOR_SCHEMA_VERSION.into());
            o.insert("kind".into(), "linerate.doctor".into());
        }
        serde_json::to_writer_pretty(&mut *out, &v).map_err(std::io::Error::other)?;
        return writeln!(out);
    }
    super::environment::render("This host", &r.local, out)?;
    if let Some(remote) = &r.remote {
        remote_text(r, remote, out)?;
    }
    if r.recommendations.is_empty() {
        writeln!(out, "Recommendations: none")?;
    } else {
        writeln!(out, "Recommendations:")?;
    }
    for x in &r.recommendations {
        // Facts of the server (interface names, drivers) reach these lines: shown escaped.
        writeln!(out, "  [{}] {}: {}", x.id, escape(x.host), escape(&x.reason))?;
        writeln!(out, "      Linux:   {}", escape(&x.linux))?;
        if let Some(b) = &x.freebsd {
            writeln!(out, "      FreeBSD: {}", escape(b))?;
        }
    }
    for n in &r.notes {
        writeln!(out, "Note: {}", escape(n))?;
    }
    Ok(())
}

fn remote_text(r: &DoctorReport, remote: &RemoteFacts, out: &mut dyn Write) -> std::io::Result<()> {
    match &remote.environment {
        Fact::Value(e) => {
            let heading =
                format!("Server {} ({})", remote.server, escape(&remote.software.display()));
            super::environment::render(&heading, e, out)?;
        }
        Fact::NA(why) => writeln!(out, "Server {}: n/a ({})", remote.server, escape(why))?,
    }
    writeln!(out, "Path to {}:", remote.server)?;
    let rtt = match &remote.rtt_us {
        Fact::Value(us) => format!("{:.3} ms", f64::from(*us) / 1000.0),
        na => na.display(),
    };
    writeln!(out, "  round trip  {rtt}")?;
    let mtu = match &remote.path_mtu_bytes {
        Fact::Value(m) if *m >= remote.searched_up_to_bytes => {
            format!("≥ {m} bytes (the largest size searched)")
        }
        Fact::Value(m) => {
            format!("{m} bytes (don't-fragment probes, 576..{})", remote.searched_up_to_bytes)
        }
        na => na.display(),
    };
    writeln!(out, "  path MTU    {mtu}")?;
    if let (Some(rate), Some(rtt)) = (r.link_bits_per_second, remote.rtt_us.value()) {
        writeln!(
            out,
            "  link        {} ({}): bandwidth-delay product {} KiB",
            format_bits_per_second(rate as f64),
            r.link_source.as_deref().unwrap_or("given"),
            bdp_bytes(rate, *rtt) / 1024
        )?;
    }
    Ok(())
}
