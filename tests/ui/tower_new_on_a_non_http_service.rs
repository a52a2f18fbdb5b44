// `ResilientLayer::new` serves HTTP; handing its service to code that
// needs a service of other requests names `ResilientLayer::cloning`.
use stormproof::Policy;
use stormproof::http::tower::ResilientLayer;
use tower::{Layer, Service, service_fn};

async fn lookup(sku: String) -> Result<usize, std::io::Error> {
    Ok(sku.len())
}

fn stock_client<S: Service<String>>(service: S) -> S {
    service
}

fn main() {
    let layer = ResilientLayer::new(Policy::builder().build().unwrap());
    stock_client(layer.layer(service_fn(lookup)));
}
