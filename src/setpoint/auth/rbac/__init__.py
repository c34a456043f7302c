"""Role-based access control: rules, who holds them, and the decision on a request."""
