"""Where reviewers are reached: the notification channels (webhook, Slack, email) behind one
durable outbox, and what each channel sends."""
