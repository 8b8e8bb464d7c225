//! A Postgres database of a test's own, so that the shop's tables (which
//! `orders --store postgres://` keeps in the database it is given) start
//! fresh on every run, whatever an earlier run left on the same server.
//! Included by the tests that run `orders` on Postgres, in this crate and
//! beside it.

/// `url` with its database replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority..]
        .find('/')
        .map_or(base.len(), |i| authority + i);
    format!("{}/{database}{query}", &base[..path])
}

/// A database of its own on the server at `url`, made at once and dropped
/// when it goes (blocking: it runs its own small runtime).
pub struct FreshDatabase {
    admin: String,
    name: String,
    /// The URL of the new database.
    pub url: String,
}

fn block_on<F>(future: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    // A runtime of its own on a thread of its own: callable from anywhere,
    // inside another runtime or not.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(future)
            })
            .join()
            .unwrap()
    })
}

async fn execute(url: &str, statement: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connected = tokio::spawn(async move {
        let _ = connection.await;
    });
    client.batch_execute(statement).await.unwrap();
    drop(client);
    let _ = connected.await;
}

impl FreshDatabase {
    /// A new, empty database named after `test`, on the server at `url`.
    pub fn create(url: &str, test: &str) -> FreshDatabase {
        let name = format!(
            "orders_{test}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        )
        .replace('-', "_");
        block_on(execute(url, &format!("CREATE DATABASE \"{name}\"")));
        FreshDatabase {
            url: with_database(url, &name),
            admin: url.to_owned(),
            name,
        }
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let statement = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let admin = self.admin.clone();
        block_on(async move { execute(&admin, &statement).await });
    }
}
