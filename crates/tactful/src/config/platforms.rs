//! The platforms' parts of the file: `[platforms.<name>]` tables and each
//! persona's `<name> = { ... }` sub-table, cut out and handed to the crate
//! that owns them (listed in `registry.rs`); only the built-in web room is
//! read here.

use std::collections::BTreeMap;

use tactful_config::{Checker, ConfigError, DeValue, PersonaPart, Section, read};

use super::{Platforms, RawPersona, RawWeb, web_settings};

/// Every platform name a config may use, built in or not: a persona's
/// sub-table under one of these names belongs to that platform.
fn names() -> Vec<&'static str> {
    std::iter::once("web")
        .chain(crate::registry::platforms().iter().map(|r| r.name))
        .collect()
}

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
    let names = names();
    if let Some(list) = root.get_mut().get_mut("persona")
        && let DeValue::Array(items) = list.get_mut()
    {
        for item in items.iter_mut() {
            let mut parts = BTreeMap::new();
            if let DeValue::Table(t) = item.get_mut() {
                for name in &names {
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
            if !names().contains(&key.as_str()) {
                return Err(check.at(
                    name.span(),
                    format!(
                        "unknown platform `{key}`: this tactful knows {}",
                        names().join(", ")
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
    for registration in crate::registry::platforms() {
        let name = registration.name;
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
        let Some(configure) = registration.configure else {
            return Err(check.at(
                section.span(),
                format!(
                    "this tactful was built without {name}: build it with the cargo feature `{name}` (on by default)"
                ),
            ));
        };
        out.connected.push((name, configure(section, parts, check)?));
    }
    Ok(out)
}
