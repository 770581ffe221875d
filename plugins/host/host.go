package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Sentinel errors returned, wrapped with detail, by this package.
var (
	// ErrNotFound reports that no plugin of the requested kind and name exists
	// in the plugin directory.
	ErrNotFound = errors.New("plugin not found")
	// ErrHashMismatch reports that a plugin binary differs from its pinned SHA-256.
	ErrHashMismatch = errors.New("plugin SHA-256 does not match its pin")
)

// MaxMessageBytes bounds one gRPC message between host and plugin. Kernel
// samples of d×D float64 values are the largest messages.
const MaxMessageBytes = 256 << 20

// Binary is one plugin executable found in a plugin directory.
type Binary struct {
	Kind string // "kernel" or "transport"
	Name string // the part after crff-<kind>-
	Path string // absolute path of the executable
}

// FileName returns the executable name of a plugin of the given kind and name.
func FileName(kind, name string) string { return "crff-" + kind + "-" + name }

// DefaultDir returns the folder of the running executable, the plugin
// directory used when the configuration names none.
func DefaultDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate running executable: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(exe), nil
}

// List returns the plugins of one kind in dir, sorted by name.
func List(dir, kind string) ([]Binary, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s plugins in %q: %w", kind, dir, err)
	}
	prefix := FileName(kind, "")
	var out []Binary
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".exe")
		if !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
			continue
		}
		b, err := Find(dir, kind, strings.TrimPrefix(name, prefix))
		if err != nil {
			continue // a directory or a non-executable file with a plugin-like name
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Find returns the plugin of the given kind and name in dir. The error wraps
// ErrNotFound and names the path it looked for.
func Find(dir, kind, name string) (Binary, error) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return Binary{}, fmt.Errorf("%s plugin name %q: %w", kind, name, ErrNotFound)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binary{}, fmt.Errorf("plugin directory %q: %w", dir, err)
	}
	path := filepath.Join(abs, FileName(kind, name))
	info, err := os.Stat(path)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		if alt, aerr := os.Stat(path + ".exe"); aerr == nil {
			path, info, err = path+".exe", alt, nil
		}
	}
	switch {
	case err != nil && errors.Is(err, os.ErrNotExist):
		return Binary{}, fmt.Errorf("%s plugin %q: no executable %s: %w", kind, name, path, ErrNotFound)
	case err != nil:
		return Binary{}, fmt.Errorf("%s plugin %q: %w", kind, name, err)
	case !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0:
		return Binary{}, fmt.Errorf("%s plugin %q: %s is not an executable file: %w", kind, name, path, ErrNotFound)
	}
	return Binary{Kind: kind, Name: name, Path: path}, nil
}

// SHA256 returns the hex SHA-256 of the file at path.
func SHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash plugin: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash plugin %q: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckPin compares the binary at path with a pinned hex SHA-256. The error
// wraps ErrHashMismatch and names both hashes.
func CheckPin(path, pin string) error {
	want := strings.ToLower(strings.TrimSpace(pin))
	if _, err := hex.DecodeString(want); err != nil || len(want) != 2*sha256.Size {
		return fmt.Errorf("plugin %q: pinned SHA-256 %q is not 64 hex digits", path, pin)
	}
	got, err := SHA256(path)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("plugin %q has SHA-256 %s, pinned %s: %w", path, got, want, ErrHashMismatch)
	}
	return nil
}

// Config says what to launch and how to talk to it.
type Config struct {
	Binary    Binary
	Pin       string // hex SHA-256 the binary must have; empty for none
	Handshake plugin.HandshakeConfig
	Plugins   plugin.PluginSet
	Logger    *slog.Logger // nil discards the plugin's log output
}

// Launch starts the plugin and returns its client and the dispensed
// interface registered under name in cfg.Plugins. The caller kills the
// process with Client.Kill; plugin.CleanupClients kills every launched
// plugin. A pinned binary is checked before it starts and again by go-plugin
// as it starts, so a swap between the two checks is also refused.
func Launch(ctx context.Context, cfg Config, name string) (*plugin.Client, any, error) {
	b := cfg.Binary
	var secure *plugin.SecureConfig
	if cfg.Pin != "" {
		if err := CheckPin(b.Path, cfg.Pin); err != nil {
			return nil, nil, err
		}
		sum, _ := hex.DecodeString(strings.ToLower(strings.TrimSpace(cfg.Pin)))
		secure = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("launch %s plugin %q: %w", b.Kind, b.Name, err)
	}
	cmd := exec.Command(b.Path)
	cmd.Env = PluginEnv(os.Environ())
	DieWithParent(cmd)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  cfg.Handshake,
		Plugins:          cfg.Plugins,
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          true,
		SkipHostEnv:      true,
		Logger:           newHCLogger(logger.With(slog.String(LogKeyPlugin, b.Name))),
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))},
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, nil, fmt.Errorf("start %s plugin %q (%s): %w", b.Kind, b.Name, b.Path, err)
	}
	raw, err := rpc.Dispense(name)
	if err != nil {
		client.Kill()
		return nil, nil, fmt.Errorf("dispense %s plugin %q: %w", b.Kind, b.Name, err)
	}
	return client, raw, nil
}

// passedEnv names the variables of crffd's environment that a plugin
// inherits: what a program needs to run, never crffd's own settings or
// secrets (CRFFD_FEDERATION_SECRET among them), since third-party plugins
// are welcome and pinning is optional.
var passedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "TZ": true, "LANG": true, "LC_ALL": true, "SYSTEMROOT": true}

// PluginEnv returns the entries of environ ("NAME=value", as os.Environ
// gives them) that a plugin process inherits: PATH, HOME, TMPDIR, TZ, LANG,
// the LC_ locale variables and, on Windows, SYSTEMROOT. go-plugin adds its
// own handshake variables.
func PluginEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if passedEnv[name] || strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}

// ServerOptions are the gRPC server options every plugin serves with, so
// that large kernel samples fit in one message.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

// CleanupAll kills every plugin process launched by this process.
func CleanupAll() { plugin.CleanupClients() }
