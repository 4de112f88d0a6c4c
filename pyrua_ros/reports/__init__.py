"""Reading run directories back: tables, aggregates, paired comparisons, HTML reports."""
