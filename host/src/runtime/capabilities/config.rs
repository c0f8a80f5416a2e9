//! `emseepea:inventory/config`: the static `[config]` table of the source's
//! manifest. The only configuration a guest sees (its environment is empty).

use super::{CallInfo, CallView, Capability, ViewOf};
use crate::runtime::bindings::emseepea::inventory::config::{self as wit, Host};
use crate::runtime::host_state::HostState;
use std::collections::BTreeMap;
use std::sync::Arc;
use wasmtime::component::Linker;

/// The capability: no server-config section, every source gets its own
/// manifest's values.
pub struct SourceConfig;

#[derive(Clone, Debug, Default)]
pub struct ConfigValues(Arc<BTreeMap<String, String>>);

impl ConfigValues {
    pub fn new(values: BTreeMap<String, String>) -> Self {
        Self(Arc::new(values))
    }
}

impl Capability for SourceConfig {
    const NAME: &'static str = "config";
    type Grant = ConfigValues;
    type Call = ConfigValues;
    type DefinitionError = std::convert::Infallible;
    type GrantError = std::convert::Infallible;
    type CallError = std::convert::Infallible;

    type Section<'c> = ();
    /// The manifest's `[config]` table.
    type Asked<'m> = &'m BTreeMap<String, String>;

    fn configure((): ()) -> Result<Self, Self::DefinitionError> {
        Ok(Self)
    }

    fn grant(&self, values: Self::Asked<'_>) -> Result<ConfigValues, Self::GrantError> {
        Ok(ConfigValues::new(values.clone()))
    }

    fn call(grant: &ConfigValues, _: &CallInfo) -> Result<ConfigValues, Self::CallError> {
        Ok(grant.clone())
    }

    fn add_to_linker(
        linker: &mut Linker<HostState>,
        view: fn(&mut HostState) -> CallView<'_, ConfigValues>,
    ) -> wasmtime::Result<()> {
        wit::add_to_linker::<HostState, ViewOf<ConfigValues>>(linker, view)
    }
}

impl Host for CallView<'_, ConfigValues> {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.state.0.get(&key).cloned())
    }
}

#[cfg(test)]
pub(crate) mod checklist;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::capabilities::harness::{Harness, manifest};
    use crate::runtime::config::SourceManifest;

    #[test]
    fn values_are_shared_not_copied() {
        let v = ConfigValues::new([("a".to_string(), "1".to_string())].into());
        let w = v.clone();
        assert!(Arc::ptr_eq(&v.0, &w.0));
    }

    #[tokio::test]
    async fn a_guest_reads_its_own_manifest_values_only() {
        let harness = Harness::new("");
        // The manifest's `mode` reaches the guest: `context` reports the call.
        let text = harness
            .read::<SourceConfig>(&manifest("context", ""), "hostile://x/7")
            .await
            .unwrap();
        assert!(
            text.starts_with("{\"principal\":{\"subject\":\"alice\""),
            "{text}"
        );
        // Without one, the guest's default (`ok` echoes the URI).
        let text = harness
            .read::<SourceConfig>(&SourceManifest::default(), "hostile://x/1")
            .await
            .unwrap();
        assert_eq!(text, "Contents of hostile://x/1");
    }
}
