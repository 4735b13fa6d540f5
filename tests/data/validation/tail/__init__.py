"""A compute-bound row reduction whose grid is 1.09 waves of one CTA per SM, and its twin whose grid is whole waves."""
