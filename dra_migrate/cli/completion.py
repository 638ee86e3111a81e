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


# cobra's ShellCompDirective bits (github.com/spf13/cobra v1.10.2 completions.go), which kubectl reads from the
# last line of a plugin's completion helper: 0 lets the shell complete file names, 4 (NoFileComp) does not.
_DEFAULT, _NO_FILE_COMP = 0, 4


def kubectl_complete(argv: list[str]) -> list[str]:
    """The lines `kubectl_complete-dra_migrate ARG... WORD` prints: `kubectl dra-migrate <TAB>` completed.

    kubectl completes a plugin's arguments by running `kubectl_complete-<plugin>` from PATH with the words
    typed after the plugin's name, the last one the word being completed (empty for a new word), and reads
    one choice per line, then `:<directive>` (k8s.io/kubectl v0.37.2 pkg/cmd/plugin/plugin_completion.go,
    pluginCompletion and getPluginCompletions). Without it kubectl completed nothing after `dra-migrate`."""
    from click.shell_completion import ShellComplete

    from dra_migrate.cli.main import cli

    args, incomplete = (argv[:-1], argv[-1]) if argv else ([], "")
    items = ShellComplete(cli, {}, "kubectl dra-migrate", _VAR).get_completions(args, incomplete)
    files = any(item.type in ("file", "dir") for item in items)
    lines = [str(item.value) for item in items if item.type == "plain"]
    return [*lines, f":{_DEFAULT if files else _NO_FILE_COMP}"]
