package policy

// String is the verdict as `images ls` shows it: "verified by key K",
// "accepted", "rejected by policy: REASON".
func (v Verdict) String() string {
	switch v.Decision {
	case Verified:
		return "verified by " + v.By
	case Rejected:
		return "rejected by policy: " + v.Reason
	}
	return string(v.Decision)
}
