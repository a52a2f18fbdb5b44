//! A foreign error type cannot carry the loop's rejections: the message
//! names `stormproof::Error`.

use stormproof::resilient;

#[resilient]
async fn fetch(url: String) -> Result<String, reqwest::Error> {
    reqwest::get(url).await?.text().await
}

fn main() {}
