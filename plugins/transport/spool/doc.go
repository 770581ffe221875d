// Package spool is crffd's spool transport (the crff-transport-spool
// plugin): envelopes travel as files in a shared directory, for sites that
// can only exchange files (a shared or synchronised folder).
//
// The directory (option "dir", which must exist) holds one inbox folder
// per daemon, named by its federation name: DIR/<name>/. To send, a
// transport writes the encoded envelope to a temporary file in the
// recipient's inbox (a dot file, which readers ignore), syncs it and
// renames it atomically to
//
//	<20-digit time stamp>-<sender>-<10-digit sequence>.env
//
// so that a reader never sees a partial envelope. Time stamps increase
// strictly per sender. Receive polls its own inbox (option "poll", a Go
// duration, default 200ms), delivers the files in name order, that is in
// order of sending, and then deletes them, or moves them to DIR/<name>/.archive/
// with option archive=true. A file that is not a valid envelope for this
// daemon, or whose name does not match its sender, is moved to
// DIR/<name>/.rejected/ and logged. Temporary files left by a writer that
// crashed are removed after an hour.
//
// # Authenticity
//
// The spool has no cryptographic sender authentication: the TLS files of
// transport.Config are not used. That an envelope's sender is who wrote the
// file rests entirely on file-system permissions: only the daemons of the
// federation may write into the directory. Run them under accounts that
// share one group, with the directory owned by that group and setgid;
// inboxes are created with mode 0770 and files 0640 (less any umask). Use
// the grpc transport where the directory cannot be protected that way.
//
// Delivery is at least once: a daemon that stops between delivering and
// deleting a file delivers it again; wire.Tracker drops the duplicate.
package spool
