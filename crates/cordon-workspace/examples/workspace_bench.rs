//! Creates and removes one workspace: what `bench/workspace-create.sh` times against raw git.
//!
//! Usage: `workspace_bench <cordon-home> <repo> [rev]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let (Some(home), Some(repo)) = (args.next(), args.next()) else {
        return Err("usage: workspace_bench <cordon-home> <repo> [rev]".into());
    };
    let rev = args
        .next()
        .map_or_else(|| "HEAD".to_owned(), |r| r.to_string_lossy().into_owned());
    let workspaces = cordon_workspace::Workspaces::new(home);
    let record = workspaces.create(&cordon_workspace::CreateRequest::new(repo, rev, false))?;
    workspaces.remove(&record.id)?;
    Ok(())
}
