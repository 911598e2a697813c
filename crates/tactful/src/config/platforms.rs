//! The platform registry: which `[platforms.<name>]` tables this build
//! knows, and who reads each. A platform crate owns its section and each
//! persona's `<name> = { ... }` sub-table (`tactful_irc::config`, ...);
//! adding a platform is one line in each list below, under its feature.

use std::collections::BTreeMap;

use tactful_config::{Checker, ConfigError, DeValue, PersonaPart, Section, read};

use super::{Platforms, RawPersona, RawWeb, web_settings};

/// Every platform name a config may use, built in or not: a persona's
/// sub-table under one of these names belongs to that platform.
pub(super) const NAMES: &[&str] = &["web", "irc", "matrix"];

/// What the file says about platforms, cut out of it before the rest is
/// read: `[platforms]`, and each persona's sub-tables by platform name.
#[derive(Default)]
pub(super) struct Cut<'i> {
    pub(super) platforms: Option<Section<'i>>,
    pub(super) personas: Vec<BTreeMap<&'static str, Section<'i>>>,
}

/// Cuts the platform parts out of the parsed file.
pub(super) fn cut<'i>(root: &mut tactful_config::Spanned<toml::de::DeTable<'i>>) -> Cut<'i> {
    let platforms = root.get_mut().remove("platforms");
    let mut personas = Vec::new();
    if let Some(list) = root.get_mut().get_mut("persona")
        && let DeValue::Array(items) = list.get_mut()
    {
        for item in items.iter_mut() {
            let mut parts = BTreeMap::new();
            if let DeValue::Table(t) = item.get_mut() {
                for name in NAMES {
                    if let Some(v) = t.remove(*name) {
                        parts.insert(*name, v);
                    }
                }
            }
            personas.push(parts);
        }
    }
    Cut { platforms, personas }
}

/// Reads every platform the file configures.
pub(super) fn read_all(
    cut: Cut<'_>,
    personas: &[RawPersona],
    check: &Checker<'_>,
) -> Result<Platforms, ConfigError> {
    let mut out = Platforms::default();
    let mut sections: BTreeMap<String, Section<'_>> = BTreeMap::new();
    if let Some(p) = cut.platforms {
        let span = p.span();
        let DeValue::Table(t) = p.into_inner() else {
            return Err(check.at(
                span,
                "`platforms` must be a table: [platforms.web], [platforms.irc], ...",
            ));
        };
        for (name, v) in t {
            let key = name.get_ref().to_string();
            if !NAMES.contains(&key.as_str()) {
                return Err(check.at(
                    name.span(),
                    format!(
                        "unknown platform `{key}`: this tactful knows {}",
                        NAMES.join(", ")
                    ),
                ));
            }
            sections.insert(key, v);
        }
    }
    // The personas' parts for `name`, in `[[persona]]` order.
    let mut parts = cut.personas;
    parts.resize_with(personas.len(), BTreeMap::new);
    let mut parts_for = |name: &'static str| -> Vec<PersonaPart<'_>> {
        personas
            .iter()
            .zip(parts.iter_mut())
            .enumerate()
            .map(|(index, (p, parts))| PersonaPart {
                index,
                id: tactful_config::Spanned::new(p.id.span(), p.id.get_ref().0.clone()),
                section: parts.remove(name),
            })
            .collect()
    };
    if let Some(web) = sections.remove("web") {
        out.web = Some(web_settings(read::<RawWeb>(web, check)?, check)?);
    }
    let web_parts = parts_for("web");
    if let Some(p) = web_parts
        .into_iter()
        .find_map(|p| p.section.map(|s| (p.index, s)))
    {
        return Err(check.at(
            p.1.span(),
            format!("`persona[{}].web`: the web room has no per-persona settings", p.0),
        ));
    }
    for &name in NAMES.iter().filter(|n| **n != "web") {
        let parts = parts_for(name);
        let Some(section) = sections.remove(name) else {
            if let Some(p) = parts.into_iter().find(|p| p.section.is_some()) {
                let span = p.section.as_ref().map_or(p.id.span(), |s| s.span());
                return Err(check.at(
                    span,
                    format!(
                        "`persona[{}].{name}` is set but there is no [platforms.{name}] table: add one",
                        p.index
                    ),
                ));
            }
            continue;
        };
        match name {
            #[cfg(feature = "irc")]
            "irc" => out.irc = Some(tactful_irc::config::parse(section, parts, check)?),
            #[cfg(feature = "matrix")]
            "matrix" => out.matrix = Some(tactful_matrix::config::parse(section, parts, check)?),
            _ => {
                return Err(check.at(
                    section.span(),
                    format!(
                        "this tactful was built without {name}: build it with the cargo feature `{name}` (on by default)"
                    ),
                ));
            }
        }
    }
    Ok(out)
}
