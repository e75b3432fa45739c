// Package stream is nodewatch's output side: the encoder that prints events
// as one JSON object per line (Encoder), as one human line per event
// (-o text), or as a table of the objects (-o table). The jq programs that
// decide what is printed are package jq.
//
// Its promise to pipelines: stdout carries nothing but events; every line
// is compact JSON with "type" first and object keys sorted, so a given
// input always prints the same bytes; output is flushed at the end of
// every batch, so a reader sees a batch as soon as it is complete; and the
// first write error is sticky and ends the run.
//
// A table needs the view, not only the events: the encoder keeps a row
// per id from the events it is given (new and updated set it, deleted
// removes it), so that the run, package watch, knows nothing of tables
// but that an Encoder is closed when it ends. Into a pipe a table is
// lines like the other formats (table.go); on a terminal it is a screen
// (screen.go), drawn at each batch's end and every second by a goroutine
// of its own, until Close gives the terminal back. Column widths are
// terminal cells (fit.go).
package stream
