package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCredentialEnv names the environment variable that holds the bridge's
// credential: never a flag, so that it stays out of process lists.
const mcpCredentialEnv = "MF_API_KEY"

// mcpMain is `mf mcp`: a stdio bridge to a running mf's agent-facing
// server, for agent hosts that start their MCP servers as processes. It
// lists the server's tools once, offers the same tools on stdin/stdout and
// forwards every call (docs/agents.md). Exit status 0 when stdin closes, 1
// when the server cannot be reached or refuses the credential, 2 usage.
func mcpMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := fs.String("api-url", envOr("MF_API_URL", "http://127.0.0.1:8081"),
		"base address of a running mf's reporting listener (its agent-facing server is <api-url>/mcp)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s=<API key or app access token> mf mcp [--api-url URL]\n", mcpCredentialEnv)
		fs.PrintDefaults()
	}
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	cred := strings.TrimSpace(os.Getenv(mcpCredentialEnv))
	if cred == "" {
		fmt.Fprintf(stderr, "mf mcp: set %s to an API key (mf_pat_…) or an app access token; the credential is never a flag\n", mcpCredentialEnv)
		return 2
	}
	endpoint := strings.TrimRight(*apiURL, "/")
	if !strings.HasSuffix(endpoint, "/mcp") {
		endpoint += "/mcp"
	}
	if err := runBridge(ctx, endpoint, cred, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "mf mcp: %v\n", err)
		return 1
	}
	return 0
}

// bridgeAuth adds the credential to every request and remembers the last
// Retry-After the server sent.
type bridgeAuth struct {
	cred       string
	rt         http.RoundTripper
	retryAfter atomic.Value // string
	lastStatus atomic.Int32
}

func (b *bridgeAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.cred)
	resp, err := b.rt.RoundTrip(req)
	if err == nil {
		b.lastStatus.Store(int32(resp.StatusCode))
		b.retryAfter.Store(resp.Header.Get("Retry-After"))
	}
	return resp, err
}

// runBridge connects to endpoint, mirrors its tools on stdin/stdout and
// forwards calls until stdin closes or ctx ends.
func runBridge(ctx context.Context, endpoint, cred string, stdin io.Reader, stdout io.Writer) error {
	ba := &bridgeAuth{cred: cred, rt: http.DefaultTransport}
	client := mcp.NewClient(&mcp.Implementation{Name: "mf-mcp-bridge", Version: releaseVersion()}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	remote, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: ba}}, nil)
	if err != nil {
		if ba.lastStatus.Load() == http.StatusUnauthorized {
			return fmt.Errorf("%s refused the credential in %s (401)", endpoint, mcpCredentialEnv)
		}
		return fmt.Errorf("cannot connect to %s: %w", endpoint, err)
	}
	defer remote.Close()
	var instructions string
	if ir := remote.InitializeResult(); ir != nil {
		instructions = ir.Instructions
	}
	local := mcp.NewServer(&mcp.Implementation{Name: "mf", Title: "mf reporting (stdio bridge)", Version: releaseVersion()},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	for tool, err := range remote.Tools(cctx, nil) {
		if err != nil {
			return fmt.Errorf("cannot list the tools of %s: %w", endpoint, err)
		}
		local.AddTool(tool, forward(remote, ba, tool.Name))
	}
	cancel()
	err = local.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return err
	}
	return nil
}

// forward is the local handler of a remote tool. A call the server
// refuses at the HTTP level (over the budget) is a tool error that says
// when to retry.
func forward(remote *mcp.ClientSession, ba *bridgeAuth, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := remote.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
		if err == nil {
			return res, nil
		}
		msg := fmt.Sprintf("%s: the agent-facing server did not answer: %v", name, err)
		if ba.lastStatus.Load() == http.StatusTooManyRequests {
			ra, _ := ba.retryAfter.Load().(string)
			msg = fmt.Sprintf("%s: over the budget of tool calls per minute; retry after %s seconds", name, ra)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
