package transport

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/crffd/crffd/certs"
)

// Log keys used by transports, fixed so that log lines can be searched.
// Envelope headers are logged with the keys of package wire.
const (
	LogKeyName     = "name"     // this daemon's federation name
	LogKeyRole     = "role"     // site or coordinator
	LogKeyAddress  = "address"  // a listening or dialled address
	LogKeyPeer     = "peer"     // the federation name of a connected peer
	LogKeyRemote   = "remote"   // a remote network address
	LogKeyReason   = "reason"   // why something was refused or dropped
	LogKeyEnvelope = "envelope" // an envelope's summary (wire.Envelope.LogValue)
	LogKeyPath     = "path"     // a file
	LogKeyError    = "error"    // an error that is not a refusal
	LogKeySerial   = "serial"   // a certificate's serial number, in hex
	LogKeyExpires  = "expires"  // when a certificate expires (RFC 3339)
)

// PluginLogger is the logger of a plugin process. It writes JSON lines in
// the format go-plugin relays to the host's logger (hclog's "@level",
// "@message", "@timestamp"), so that the daemon's log shows the plugin's
// lines at their level with their keys.
type PluginLogger struct {
	level *slog.LevelVar
	log   *slog.Logger
}

// NewPluginLogger returns a logger writing to w, or to standard error when
// w is nil, at level info.
func NewPluginLogger(w io.Writer) *PluginLogger {
	if w == nil {
		w = os.Stderr
	}
	lv := new(slog.LevelVar)
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: hclogAttr})
	return &PluginLogger{level: lv, log: slog.New(h)}
}

// Logger returns the slog logger.
func (p *PluginLogger) Logger() *slog.Logger { return p.log }

// SetLevel sets the level from OptionLogLevel: "", debug, info, warn or error.
func (p *PluginLogger) SetLevel(s string) error {
	if s == "" {
		return nil
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("transport: option %s=%q: %w", OptionLogLevel, s, ErrConfig)
	}
	p.level.Set(lv)
	return nil
}

// hclogAttr renames slog's built-in keys to hclog's.
func hclogAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
	case slog.LevelKey:
		lv, _ := a.Value.Any().(slog.Level)
		return slog.String("@level", hclogLevel(lv))
	case slog.MessageKey:
		return slog.String("@message", a.Value.String())
	}
	return a
}

func hclogLevel(lv slog.Level) string {
	switch {
	case lv < slog.LevelDebug:
		return "trace"
	case lv < slog.LevelInfo:
		return "debug"
	case lv < slog.LevelWarn:
		return "info"
	case lv < slog.LevelError:
		return "warn"
	}
	return "error"
}

// discard is a logger that writes nothing, for tests and nil options.
var discard = slog.New(slog.DiscardHandler)

// orDiscard returns l, or a logger that discards when l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}

// LogReload logs what a certs.Reloader of files f reports: at level warn
// a certificate now in use, and at level error files that cannot be used.
// Warn, not info: the daemon shows a plugin's info lines only at level
// debug, and a change of the certificate a daemon presents is what an
// operator who renewed it wants confirmed, and one who did not must see.
func LogReload(log *slog.Logger, f certs.Files, id *certs.Identity, err error) {
	if err != nil {
		log.Error("certificate files changed but cannot be used; the previous certificate stays in use until they are fixed",
			slog.String(LogKeyPath, f.Cert), slog.String(LogKeyError, err.Error()))
		return
	}
	log.Warn("certificate files changed: using the new certificate", slog.String(LogKeyPath, f.Cert),
		slog.String(LogKeySerial, id.Leaf.SerialNumber.Text(16)),
		slog.String(LogKeyExpires, id.Leaf.NotAfter.UTC().Format(time.RFC3339)))
}
