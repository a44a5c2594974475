"""ReviewedChat: the turn loop, threads, trust."""
