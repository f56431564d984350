"""What a decision is trusted on, below the stages: the house policy (`house`), the house
repository that pins keys, holds the policy and the alias table (`repository`), and every stage
judged again offline from what its attempts kept (`rejudge`; probe gates over their kept
exchanges: `replay`)."""
