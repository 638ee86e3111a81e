"""`dra-migrate completion bash|zsh|fish`: the shell completion script, from Click's own completion."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
_VAR = "_DRA_MIGRATE_COMPLETE"  # Click's convention: _<PROG_NAME>_COMPLETE


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL; load it from your shell's start-up file.

    \b
    Examples:
      echo 'eval "$(dra-migrate completion bash)"' >> ~/.bashrc
      echo 'eval "$(dra-migrate completion zsh)"' >> ~/.zshrc
      dra-migrate completion fish > ~/.config/fish/completions/dra-migrate.fish
    """
    from click.shell_completion import get_completion_class

    from dra_migrate.cli.main import cli

    cls = get_completion_class(shell)
    if cls is None:  # click.Choice already refused other names
        raise click.UsageError(f"no completion for {shell}")
    click.echo(cls(cli, {}, "dra-migrate", _VAR).source())
