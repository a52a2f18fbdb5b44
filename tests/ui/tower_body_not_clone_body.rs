// A request body `CloneBody` does not cover is named, with the ways out.
use stormproof::Policy;
use stormproof::http::tower::ResilientLayer;
use tower::{Layer, Service, service_fn};

struct Upload;

async fn store(_: http::Request<Upload>) -> Result<http::Response<String>, std::io::Error> {
    Ok(http::Response::new(String::new()))
}

fn upload_client<S: Service<http::Request<Upload>>>(service: S) -> S {
    service
}

fn main() {
    let layer = ResilientLayer::new(Policy::builder().build().unwrap());
    upload_client(layer.layer(service_fn(store)));
}
