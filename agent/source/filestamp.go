package source

// racyWindow is how long before a read a manifest must have last changed
// for its stat to stand for the content read (filestamp.Stamp.Settled).
const racyWindow = settleTime
