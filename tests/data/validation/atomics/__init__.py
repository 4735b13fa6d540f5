"""The sum of an fp32 vector into one address: one atomic add per element (every thread of every CTA contending for
the same word), and its twin with one atomic add per CTA of the CTA's partial sum."""
