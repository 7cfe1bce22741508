//! ferrodis-server: argv and redis.conf → Config → server::run. Nothing else.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match ferrodis::config::Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    ferrodis::log::init(&config.loglevel);
    std::process::exit(ferrodis::server::run(config));
}
