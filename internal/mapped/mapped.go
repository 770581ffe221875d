// Package mapped provides large arrays of float64 held in a shared mapping
// of an unnamed temporary file rather than in the Go heap, for one-shot
// commands that read a site's rows once and keep them to the end.
//
// The kernel pages such an array in as it is read and may write it out
// and drop it under memory pressure, as it does any file's pages, where a
// heap array of the same size must stay resident. It is also outside what
// the garbage collector paces: a heap of L live bytes grows to about 2L
// before each collection (GOGC=100), an array here adds its size once.
//
// The file is made with O_TMPFILE, so it never has a name another process
// could open, and its disk blocks are reserved when it is made, so that a
// full disk fails the allocation rather than a later write (which, to a
// mapping, is a SIGBUS). It is readable by its owner alone. A mapping is
// never released: the process's end frees it and the file with it, so
// the arrays are for values that live as long as the process.
package mapped

import "errors"

// ErrUnsupported reports a system or filesystem without unnamed temporary
// files or shared mappings; callers fall back to the heap.
var ErrUnsupported = errors.New("mapped: not supported here")
