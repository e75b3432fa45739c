// Package stream is nodewatch's output side: the encoder that prints events
// as one JSON object per line (Encoder), or as one human line per event
// (-o text). The jq programs that decide what is printed are package jq.
//
// Its promise to pipelines: stdout carries nothing but events; every line
// is compact JSON with "type" first and object keys sorted, so a given
// input always prints the same bytes; output is flushed at the end of
// every batch, so a reader sees a batch as soon as it is complete; and the
// first write error is sticky and ends the run.
package stream
