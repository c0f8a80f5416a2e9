//! A source that exports both `inventory` and `inventory-json`: the host
//! refuses it at startup (a source lists one way).

wit_bindgen::generate!({
    inline: "package test:two-lists;
        world both {
            include emseepea:inventory/inventory-source@0.1.0;
            export emseepea:inventory/inventory-json@0.1.0;
        }",
    path: "../../wit",
    world: "test:two-lists/both",
    generate_all,
});

use emseepea::inventory::types::{
    Access, CallContext, InventoryPage, ResourceContents, SourceError, Template,
};
use exports::emseepea::inventory::{inventory, inventory_json, template};

struct Both;

impl template::Guest for Both {
    fn describe() -> Template {
        Template {
            name: "both".into(),
            uri_template: "both://{id}".into(),
            title: None,
            description: None,
            mime_type: None,
            access: Access::Protected,
            required_scopes: vec!["both:read".into()],
            discoverable: true,
        }
    }

    fn read(_uri: String, _context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        Err(SourceError::NotFound)
    }
}

impl inventory::Guest for Both {
    fn list(_: Option<String>, _: u32, _: CallContext) -> Result<InventoryPage, SourceError> {
        Ok(InventoryPage {
            entries: vec![],
            has_more: false,
        })
    }
}

impl inventory_json::Guest for Both {
    fn list(_: Option<String>, _: u32, _: CallContext) -> Result<Vec<u8>, SourceError> {
        Ok(br#"{"entries":[],"hasMore":false}"#.to_vec())
    }
}

export!(Both);
