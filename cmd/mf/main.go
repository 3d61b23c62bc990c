package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: mf <command> [flags]

commands:
  serve       run every role in one process (ingest, processor, reporting and admin API)
  ingest      run the /v1 ingest and flag service only
  process     run the processor only
  api         run the reporting and admin API only
  provision   apply a provisioning file: mf provision [flags] FILE
  import      load search-console or ads-platform rows: mf import --project ID [flags] FILE
  replay      rebuild a project's tables from its history: mf replay --project ID [--from DATE]
  erase       erase a person from every table and file, and wait until done: mf erase --project ID --person REF
  eval        evaluate flags: JSON lines on stdin, results on stdout
  mcp         a stdio bridge to a running mf's agent-facing server: MF_API_KEY=… mf mcp [--api-url URL]
  version     print the version (also mf --version)

Run 'mf <command> -h' for the flags of a command.
`

// run is main without the process: tests drive it with their own arguments,
// streams and context.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serveMain(ctx, rolesAll, rest, stdout, stderr)
	case "ingest":
		return serveMain(ctx, roleIngest, rest, stdout, stderr)
	case "process":
		return serveMain(ctx, roleProcess, rest, stdout, stderr)
	case "api":
		return serveMain(ctx, roleAPI, rest, stdout, stderr)
	case "provision":
		return provisionMain(ctx, rest, stdout, stderr)
	case "import":
		return importMain(ctx, rest, stdout, stderr)
	case "replay":
		return replayMain(ctx, rest, stdout, stderr)
	case "erase":
		return eraseMain(ctx, rest, stdout, stderr)
	case "eval":
		return evalMain(ctx, rest, stdin, stdout, stderr)
	case "mcp":
		return mcpMain(ctx, rest, stdin, stdout, stderr)
	case "version", "--version", "-version", "-v":
		return printVersion(stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		msg := fmt.Sprintf("mf: unknown command %q", cmd)
		commands := []string{"serve", "ingest", "process", "api", "provision", "import", "replay", "erase", "eval", "mcp", "version", "help"}
		if near := nearest(strings.TrimLeft(cmd, "-"), commands); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		fmt.Fprintf(stderr, "%s\n\n%s", msg, usage)
		return 2
	}
}
