//! The MCP conformance suite's template fixture: a public resource template
//! `test://template/{id}/data` whose read returns JSON naming the id.

wit_bindgen::generate!({ world: "resource-template", path: "../../wit" });

use emseepea::inventory::types::{
    Access, CallContext, ResourceBody, ResourceContents, SourceError, Template,
};
use exports::emseepea::inventory::template;

struct Fixture;

impl template::Guest for Fixture {
    fn describe() -> Template {
        Template {
            name: "template-data".into(),
            uri_template: "test://template/{id}/data".into(),
            title: Some("Template data".into()),
            description: Some("A resource template with an id parameter".into()),
            mime_type: Some("application/json".into()),
            access: Access::Public,
            required_scopes: vec![],
            discoverable: true,
        }
    }

    fn read(uri: String, _context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let id = uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
            .filter(|id| {
                !id.is_empty()
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
            .ok_or(SourceError::NotFound)?;
        Ok(vec![ResourceContents {
            body: ResourceBody::Text(format!(
                "{{\"id\":\"{id}\",\"templateTest\":true,\"data\":\"Data for ID: {id}\"}}"
            )),
            mime_type: Some("application/json".into()),
            uri,
        }])
    }
}

export!(Fixture);
