"""Schedule: group operators into fusion groups, pick a strategy per group, write the Plan.

Also the fix path: demote the group a failure belongs to one level. Reads the frontend's records.
"""
