//! Reaches the facade through `my_lib` but does not say so: a compile
//! error at the attribute that names the way out.

#[my_lib::stormproof::resilient]
pub async fn flaky() -> Result<u32, std::io::Error> {
    Ok(1)
}
